// Map, MapArray and index Map: out[i] = f(index(i), [array,] in0[i], ..., uniforms).
// Defines: SKEL_OUT_T, SKEL_PARAMS (extra kernel parameters, each preceded by a comma:
// the array, the inputs in0.., the uniforms u0..), SKEL_CALL(i) (the user call at flat
// position i; may use `cols` for a 2D index).
// SKEL_VLOAD(i) / SKEL_CALLV(i, v) / SKEL_ALIGNED: the vectorised form: four consecutive
// elements per thread, loaded and stored as 16-byte accesses where the types allow, when
// every pointer is 16-byte aligned.
// The call covers positions base .. base + n of the operands (one MultiStream chunk): the
// pointers point at position `skel_base`, index parameters see skel_base + i.
// SKEL_LAUNCH picks the launch shape the user function's cost class asks for
// (src/codegen/cost.rs): 0 memory-bound, 1 one element per thread, 2 a 2D index map over a
// 2D grid (SKEL_CALL2(i, row, col) is then the call with the row and column given), 3 an
// all-pairs MapArray whose loop reads the array through shared-memory tiles.
// SKEL_STORE(i, r) stores result r at position i (forms 1 and 2): `out[i] = r` unless
// defined before (a multi-output Map stores each member of a tuple result to its own
// pointer, SKEL_PARAMS then starts with them, and `out` is unused).

#ifndef SKEL_STORE
#define SKEL_STORE(i, r) out[i] = (r)
#endif

#ifndef SKEL_RC
#define SKEL_RC 0
#endif

#if SKEL_LAUNCH == 0
// Grid-stride loop, four independent elements per thread and iteration in flight.
// SKEL_RC (1: SKEL_CALLV reads the row and column of element v as skel_r[v], skel_c[v]).
extern "C" __global__ void __launch_bounds__(256)
skel_map(SKEL_OUT_T* __restrict__ out, skel_u64 n, skel_u64 cols, skel_u64 skel_base SKEL_PARAMS) {
    (void)skel_base;
    const skel_u64 stride = (skel_u64)gridDim.x * blockDim.x;
    skel_u64 i = (skel_u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (SKEL_ALIGNED) {
        const skel_u64 nq = n / 4;
#if SKEL_RC
        // The row and column of the thread's first element, advanced by whole strides: two
        // divisions per thread instead of two per element.
        skel_u64 rc_row = 0, rc_col = 0, rc_drow = 0, rc_dcol = 0;
        if (i < nq) {
            const skel_u64 first = skel_base + i * 4, step = stride * 4;
            rc_row = first / cols;
            rc_col = first - rc_row * cols;
            rc_drow = step / cols;
            rc_dcol = step - rc_drow * cols;
        }
#endif
        for (skel_u64 q = i; q < nq; q += stride) {
            const skel_u64 b = q * 4;
#if SKEL_RC
            skel_u64 skel_r[4], skel_c[4];
            {
                skel_u64 row = rc_row, col = rc_col;
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    skel_r[v] = row;
                    skel_c[v] = col;
                    if (++col == cols) {
                        col = 0;
                        ++row;
                    }
                }
                rc_row += rc_drow;
                rc_col += rc_dcol;
                if (rc_col >= cols) {
                    rc_col -= cols;
                    ++rc_row;
                }
            }
#endif
            SKEL_VLOAD(b)
            SKEL_OUT_T r[4];
#pragma unroll
            for (int v = 0; v < 4; ++v) r[v] = SKEL_CALLV(b, v);
            skel_storev(out + b, r);
        }
        for (i += nq * 4; i < n; i += stride) out[i] = SKEL_CALL(i);
        return;
    }
    for (; i + 3 * stride < n; i += 4 * stride) {
        SKEL_OUT_T r0 = SKEL_CALL(i);
        SKEL_OUT_T r1 = SKEL_CALL(i + stride);
        SKEL_OUT_T r2 = SKEL_CALL(i + 2 * stride);
        SKEL_OUT_T r3 = SKEL_CALL(i + 3 * stride);
        out[i] = r0;
        out[i + stride] = r1;
        out[i + 2 * stride] = r2;
        out[i + 3 * stride] = r3;
    }
    for (; i < n; i += stride) out[i] = SKEL_CALL(i);
}

#elif SKEL_LAUNCH == 1
// Compute-bound: one element per thread, a grid as large as the call (the loop only strides
// past the grid size limit), so a loop whose trip count differs between elements runs once
// per thread and a short call of heavy elements still reaches every multiprocessor.
extern "C" __global__ void __launch_bounds__(256)
skel_map(SKEL_OUT_T* __restrict__ out, skel_u64 n, skel_u64 cols, skel_u64 skel_base SKEL_PARAMS) {
    (void)skel_base;
    (void)cols;
    const skel_u64 stride = (skel_u64)gridDim.x * blockDim.x;
    for (skel_u64 i = (skel_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) SKEL_STORE(i, SKEL_CALL(i));
}

#elif SKEL_LAUNCH == 3
// All-pairs MapArray: the user function's loop over the array runs tile by tile
// (src/codegen/tile.rs); all threads of a block load each tile into dynamic shared memory
// together and wait at barriers, so every thread of a block must make the same calls: a
// thread past the end computes the last element again and does not store it. The grid
// strides by whole blocks, so all threads of a block make the same number of rounds.
extern "C" __global__ void __launch_bounds__(256)
skel_map(SKEL_OUT_T* __restrict__ out, skel_u64 n, skel_u64 cols, skel_u64 skel_base SKEL_PARAMS) {
    (void)skel_base;
    (void)cols;
    const skel_u64 stride = (skel_u64)gridDim.x * blockDim.x;
    for (skel_u64 b = (skel_u64)blockIdx.x * blockDim.x; b < n; b += stride) {
        const skel_u64 i = b + threadIdx.x;
        const skel_u64 c = i < n ? i : n - 1;
        const SKEL_OUT_T r = SKEL_CALL(c);
        if (i < n) out[i] = r;
    }
}

#else
// Compute-bound 2D index map: x runs along a row, y over the rows the chunk touches (it may
// start and end inside a row). Row and column are the thread's coordinates: one 64-bit
// multiply per element instead of a division and a remainder.
extern "C" __global__ void __launch_bounds__(256)
skel_map(SKEL_OUT_T* __restrict__ out, skel_u64 n, skel_u64 cols, skel_u64 skel_base SKEL_PARAMS) {
    const skel_u64 col = (skel_u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    const skel_u64 end = skel_base + n;
    const skel_u64 rows_stride = (skel_u64)gridDim.y * blockDim.y;
    for (skel_u64 row = skel_base / cols + (skel_u64)blockIdx.y * blockDim.y + threadIdx.y;; row += rows_stride) {
        const skel_u64 flat = row * cols + col;
        if (flat >= end) return;
        if (flat >= skel_base) {
            const skel_u64 i = flat - skel_base;
            SKEL_STORE(i, SKEL_CALL2(i, row, col));
        }
    }
}
#endif
