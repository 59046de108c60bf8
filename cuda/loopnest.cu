// Reduction loop nests (src/codegen/loopnest.rs): matrix products and matrix-vector products
// written as an index Map over container arguments. One source for both GPU backends: the
// OpenCL backend compiles this file too (the prologue below picks the dialect).
//
// Defines from the backend: SKEL_LN_T / SKEL_LN_TA / SKEL_LN_TB (result and operand types),
// SKEL_LN_OUT_PARAMS and SKEL_LN_OUT(i) (the output and its element i), SKEL_LN_PARAMS (the
// container arguments and uniforms, each preceded by a comma), SKEL_LN_A(r, l) and
// SKEL_LN_B(l, c) (operand reads, indices clamped as the unchecked user function clamps
// them), SKEL_LN_A_RAW / SKEL_LN_B_RAW (the same reads unclamped) and SKEL_LN_A_FITS /
// SKEL_LN_B_FITS(ends) (whether indices below those ends are inside the operand), SKEL_LN_K (the trip count), SKEL_LN_INIT (the accumulator's start) and
// SKEL_LN_STEP(acc, x, y) (one step of the user's accumulation, its own operations),
// SKEL_LN_FSTEP(acc, x, y) (the step the tiles take: SKEL_LN_STEP, or for a min/max step a
// plain select) and SKEL_LN_REDO(v) (whether a final value of SKEL_LN_FSTEP must be folded
// again with SKEL_LN_STEP; see loopnest_kernels.rs).
// SKEL_LN_GEMM with SKEL_LN_NAME, SKEL_BM, SKEL_BN, SKEL_BK, SKEL_TM, SKEL_TN selects a
// matrix-product kernel (the file is then included once per tile shape); SKEL_LN_GEMV with
// SKEL_LN_NAME, SKEL_R, SKEL_TK the matrix-vector kernel (included once per band shape).
//
// Every output element starts at SKEL_LN_INIT and takes its steps in ascending l, as the
// user function does, so results are those of the cpu backend bit for bit (kernels are
// compiled without FMA contraction). The call covers flat positions skel_base .. skel_base
// + n of the output (one MultiStream chunk); a tile stores only its elements inside them.

#ifndef SKEL_LN_PROLOGUE
#define SKEL_LN_PROLOGUE
#ifdef __OPENCL_VERSION__
typedef ulong skel_ln_u64;
#define SKEL_LN_KERNEL __kernel __attribute__((reqd_work_group_size(256, 1, 1))) void
#define SKEL_LN_LOCAL __local
#define SKEL_LN_ALIGN16 __attribute__((aligned(16)))
#define SKEL_LN_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define SKEL_LN_TID ((int)get_local_id(0))
#define SKEL_LN_BX ((skel_ln_u64)get_group_id(0))
#define SKEL_LN_BY ((skel_ln_u64)get_group_id(1))
#else
typedef unsigned long long skel_ln_u64;
#define SKEL_LN_KERNEL extern "C" __global__ void __launch_bounds__(256)
#define SKEL_LN_LOCAL __shared__
#define SKEL_LN_ALIGN16 __align__(16)
#define SKEL_LN_BARRIER() __syncthreads()
#define SKEL_LN_TID ((int)threadIdx.x)
#define SKEL_LN_BX ((skel_ln_u64)blockIdx.x)
#define SKEL_LN_BY ((skel_ln_u64)blockIdx.y)
#endif
// i clamped into 0 .. len (as the unchecked user function clamps an index).
SKEL_FN skel_ln_u64 skel_ln_idx(skel_ln_u64 i, skel_ln_u64 len) { return i < len ? i : len - (len != 0); }
// Output (r, c) folded again with the exact step, straight from global memory, for an
// output the select of SKEL_LN_FSTEP may have got wrong (SKEL_LN_REDO: rare).
#define SKEL_LN_REFOLD(v, r, c, k_end) do { (v) = SKEL_LN_INIT; \
    for (skel_ln_u64 skel_ln_l = 0; skel_ln_l < (k_end); ++skel_ln_l) \
        (v) = SKEL_LN_STEP((v), SKEL_LN_A((r), skel_ln_l), SKEL_LN_B(skel_ln_l, (c))); } while (0)
#endif

#ifdef SKEL_LN_GEMM
// An SKEL_BM x SKEL_BN tile of the output per block of 256 threads, each thread an
// SKEL_TM x SKEL_TN register tile: two runs of SKEL_TM / 2 rows, one in each half of the
// tile (rows ty * TM/2 + r and BM/2 + ty * TM/2 + r), and the same for columns. A run is
// contiguous in shared memory, so its reads are vector loads (4 words for 8 x 8), and the
// threads of a warp read consecutive runs of the B tile (conflict-free) and at most two
// runs of the A tile (broadcast).
// Operand tiles of SKEL_BK steps go global -> registers -> shared memory, double-buffered:
// the next tile's loads are in flight while the current one is used.
#define SKEL_LN_ROW(r) ((r) < SKEL_TM / 2 ? ty * (SKEL_TM / 2) + (r) : SKEL_BM / 2 + ty * (SKEL_TM / 2) + (r) - SKEL_TM / 2)
#define SKEL_LN_COL(c) ((c) < SKEL_TN / 2 ? tx * (SKEL_TN / 2) + (c) : SKEL_BN / 2 + tx * (SKEL_TN / 2) + (c) - SKEL_TN / 2)
SKEL_LN_KERNEL SKEL_LN_NAME(SKEL_LN_OUT_PARAMS, skel_ln_u64 n, skel_ln_u64 cols, skel_ln_u64 skel_base SKEL_LN_PARAMS)
{
    // A is stored transposed (a column of the tile is a row here), padded against bank
    // conflicts of the stores.
    SKEL_LN_LOCAL SKEL_LN_ALIGN16 SKEL_LN_TA As[2][SKEL_BK][SKEL_BM + 4];
    SKEL_LN_LOCAL SKEL_LN_ALIGN16 SKEL_LN_TB Bs[2][SKEL_BK][SKEL_BN];
    const int tid = SKEL_LN_TID;
    const int tx = tid % (SKEL_BN / SKEL_TN);
    const int ty = tid / (SKEL_BN / SKEL_TN);
    const skel_ln_u64 row0 = skel_base / cols + SKEL_LN_BY * SKEL_BM;
    const skel_ln_u64 col0 = SKEL_LN_BX * SKEL_BN;
    const skel_ln_u64 k_end = SKEL_LN_K;
    const SKEL_LN_T start = SKEL_LN_INIT;
    SKEL_LN_T acc[SKEL_TM][SKEL_TN];
#pragma unroll
    for (int r = 0; r < SKEL_TM; ++r) {
#pragma unroll
        for (int c = 0; c < SKEL_TN; ++c) acc[r][c] = start;
    }
    SKEL_LN_TA ra[SKEL_BM * SKEL_BK / 256];
    SKEL_LN_TB rb[SKEL_BK * SKEL_BN / 256];
    // Tiles wholly inside their operands (all but the borders) are read without clamps.
    const int a_rows_fit = SKEL_LN_A_FITS(row0 + SKEL_BM, 0);
    const int b_cols_fit = SKEL_LN_B_FITS(0, col0 + SKEL_BN);
    if (k_end > 0) {
        const int fit_a = a_rows_fit && SKEL_LN_A_FITS(0, SKEL_BK);
        const int fit_b = b_cols_fit && SKEL_LN_B_FITS(SKEL_BK, 0);
#pragma unroll
        for (int t = 0; t < SKEL_BM * SKEL_BK / 256; ++t) {
            const int e = tid + t * 256;
            As[0][e % SKEL_BK][e / SKEL_BK] = fit_a ? SKEL_LN_A_RAW(row0 + e / SKEL_BK, (skel_ln_u64)(e % SKEL_BK))
                                                    : SKEL_LN_A(row0 + e / SKEL_BK, (skel_ln_u64)(e % SKEL_BK));
        }
#pragma unroll
        for (int t = 0; t < SKEL_BK * SKEL_BN / 256; ++t) {
            const int e = tid + t * 256;
            Bs[0][e / SKEL_BN][e % SKEL_BN] = fit_b ? SKEL_LN_B_RAW((skel_ln_u64)(e / SKEL_BN), col0 + e % SKEL_BN)
                                                    : SKEL_LN_B((skel_ln_u64)(e / SKEL_BN), col0 + e % SKEL_BN);
        }
    }
    SKEL_LN_BARRIER();
    int buf = 0;
    for (skel_ln_u64 k0 = 0; k0 < k_end; k0 += SKEL_BK) {
        const int more = k0 + SKEL_BK < k_end;
        if (more) {
            const skel_ln_u64 k1 = k0 + SKEL_BK;
            if (a_rows_fit && SKEL_LN_A_FITS(0, k1 + SKEL_BK)) {
#pragma unroll
                for (int t = 0; t < SKEL_BM * SKEL_BK / 256; ++t) {
                    const int e = tid + t * 256;
                    ra[t] = SKEL_LN_A_RAW(row0 + e / SKEL_BK, k1 + e % SKEL_BK);
                }
            } else {
#pragma unroll
                for (int t = 0; t < SKEL_BM * SKEL_BK / 256; ++t) {
                    const int e = tid + t * 256;
                    ra[t] = SKEL_LN_A(row0 + e / SKEL_BK, k1 + e % SKEL_BK);
                }
            }
            if (b_cols_fit && SKEL_LN_B_FITS(k1 + SKEL_BK, 0)) {
#pragma unroll
                for (int t = 0; t < SKEL_BK * SKEL_BN / 256; ++t) {
                    const int e = tid + t * 256;
                    rb[t] = SKEL_LN_B_RAW(k1 + e / SKEL_BN, col0 + e % SKEL_BN);
                }
            } else {
#pragma unroll
                for (int t = 0; t < SKEL_BK * SKEL_BN / 256; ++t) {
                    const int e = tid + t * 256;
                    rb[t] = SKEL_LN_B(k1 + e / SKEL_BN, col0 + e % SKEL_BN);
                }
            }
        }
        if (k_end - k0 >= SKEL_BK) {
#pragma unroll
            for (int k = 0; k < SKEL_BK; ++k) {
                SKEL_LN_TA a[SKEL_TM];
                SKEL_LN_TB b[SKEL_TN];
#pragma unroll
                for (int r = 0; r < SKEL_TM; ++r) a[r] = As[buf][k][SKEL_LN_ROW(r)];
#pragma unroll
                for (int c = 0; c < SKEL_TN; ++c) b[c] = Bs[buf][k][SKEL_LN_COL(c)];
#pragma unroll
                for (int r = 0; r < SKEL_TM; ++r) {
#pragma unroll
                    for (int c = 0; c < SKEL_TN; ++c) acc[r][c] = SKEL_LN_FSTEP(acc[r][c], a[r], b[c]);
                }
            }
        } else {
            // The last, partial tile: only its steps below k_end.
            const int kt = (int)(k_end - k0);
            for (int k = 0; k < kt; ++k) {
                SKEL_LN_TA a[SKEL_TM];
                SKEL_LN_TB b[SKEL_TN];
#pragma unroll
                for (int r = 0; r < SKEL_TM; ++r) a[r] = As[buf][k][SKEL_LN_ROW(r)];
#pragma unroll
                for (int c = 0; c < SKEL_TN; ++c) b[c] = Bs[buf][k][SKEL_LN_COL(c)];
#pragma unroll
                for (int r = 0; r < SKEL_TM; ++r) {
#pragma unroll
                    for (int c = 0; c < SKEL_TN; ++c) acc[r][c] = SKEL_LN_FSTEP(acc[r][c], a[r], b[c]);
                }
            }
        }
        if (more) {
#pragma unroll
            for (int t = 0; t < SKEL_BM * SKEL_BK / 256; ++t) {
                const int e = tid + t * 256;
                As[buf ^ 1][e % SKEL_BK][e / SKEL_BK] = ra[t];
            }
#pragma unroll
            for (int t = 0; t < SKEL_BK * SKEL_BN / 256; ++t) {
                const int e = tid + t * 256;
                Bs[buf ^ 1][e / SKEL_BN][e % SKEL_BN] = rb[t];
            }
        }
        // One barrier a tile: the buffer written above was last read before the previous
        // barrier, the one read next was written before this one.
        SKEL_LN_BARRIER();
        buf ^= 1;
    }
    const skel_ln_u64 end = skel_base + n;
#pragma unroll
    for (int r = 0; r < SKEL_TM; ++r) {
        const skel_ln_u64 row = row0 + SKEL_LN_ROW(r);
#pragma unroll
        for (int c = 0; c < SKEL_TN; ++c) {
            const skel_ln_u64 col = col0 + SKEL_LN_COL(c);
            const skel_ln_u64 flat = row * cols + col;
            if (col < cols && flat >= skel_base && flat < end) {
                SKEL_LN_T v = acc[r][c];
                if (SKEL_LN_REDO(v)) SKEL_LN_REFOLD(v, row, col, k_end);
                SKEL_LN_OUT(flat - skel_base) = v;
            }
        }
    }
}
#undef SKEL_LN_ROW
#undef SKEL_LN_COL
#endif

#ifdef SKEL_LN_GEMV
// SKEL_R rows per block of 256 threads. A tile of SKEL_R rows x SKEL_TK steps is read
// coalesced (a warp reads a run of one row) into shared memory, the vector's run beside it;
// then thread r < SKEL_R takes its row's steps in order (rows padded by one: the threads
// read different banks). Double-buffered as the product kernel. Fewer rows call for
// narrower, longer bands: the bytes in flight are rows x SKEL_TK either way.
SKEL_LN_KERNEL SKEL_LN_NAME(SKEL_LN_OUT_PARAMS, skel_ln_u64 n, skel_ln_u64 cols, skel_ln_u64 skel_base SKEL_LN_PARAMS)
{
    SKEL_LN_LOCAL SKEL_LN_TA Ms[2][SKEL_R][SKEL_TK + 1];
    SKEL_LN_LOCAL SKEL_LN_TB Xs[2][SKEL_TK];
    (void)cols;
    const int tid = SKEL_LN_TID;
    const skel_ln_u64 row0 = skel_base + SKEL_LN_BX * SKEL_R;
    const skel_ln_u64 k_end = SKEL_LN_K;
    SKEL_LN_T acc = SKEL_LN_INIT;
    SKEL_LN_TA rm[SKEL_R * SKEL_TK / 256];
    SKEL_LN_TB rx = (SKEL_LN_TB)0;
    // Tiles wholly inside the matrix and vector (all but the borders) are read without
    // clamps.
    const int rows_fit = SKEL_LN_A_FITS(row0 + SKEL_R, 0);
    if (k_end > 0) {
        const int fit = rows_fit && SKEL_LN_A_FITS(0, SKEL_TK);
#pragma unroll
        for (int t = 0; t < SKEL_R * SKEL_TK / 256; ++t) {
            const int e = tid + t * 256;
            Ms[0][e / SKEL_TK][e % SKEL_TK] = fit ? SKEL_LN_A_RAW(row0 + e / SKEL_TK, (skel_ln_u64)(e % SKEL_TK))
                                                  : SKEL_LN_A(row0 + e / SKEL_TK, (skel_ln_u64)(e % SKEL_TK));
        }
        if (tid < SKEL_TK) Xs[0][tid] = SKEL_LN_B((skel_ln_u64)tid, 0);
    }
    SKEL_LN_BARRIER();
    int buf = 0;
    for (skel_ln_u64 k0 = 0; k0 < k_end; k0 += SKEL_TK) {
        const int more = k0 + SKEL_TK < k_end;
        if (more) {
            const skel_ln_u64 k1 = k0 + SKEL_TK;
            if (rows_fit && SKEL_LN_A_FITS(0, k1 + SKEL_TK)) {
#pragma unroll
                for (int t = 0; t < SKEL_R * SKEL_TK / 256; ++t) {
                    const int e = tid + t * 256;
                    rm[t] = SKEL_LN_A_RAW(row0 + e / SKEL_TK, k1 + e % SKEL_TK);
                }
            } else {
#pragma unroll
                for (int t = 0; t < SKEL_R * SKEL_TK / 256; ++t) {
                    const int e = tid + t * 256;
                    rm[t] = SKEL_LN_A(row0 + e / SKEL_TK, k1 + e % SKEL_TK);
                }
            }
            if (tid < SKEL_TK) rx = SKEL_LN_B(k1 + tid, 0);
        }
        if (tid < SKEL_R) {
            if (k_end - k0 >= SKEL_TK) {
#pragma unroll 16
                for (int k = 0; k < SKEL_TK; ++k) acc = SKEL_LN_FSTEP(acc, Ms[buf][tid][k], Xs[buf][k]);
            } else {
                const int kt = (int)(k_end - k0);
                for (int k = 0; k < kt; ++k) acc = SKEL_LN_FSTEP(acc, Ms[buf][tid][k], Xs[buf][k]);
            }
        }
        if (more) {
#pragma unroll
            for (int t = 0; t < SKEL_R * SKEL_TK / 256; ++t) {
                const int e = tid + t * 256;
                Ms[buf ^ 1][e / SKEL_TK][e % SKEL_TK] = rm[t];
            }
            if (tid < SKEL_TK) Xs[buf ^ 1][tid] = rx;
        }
        SKEL_LN_BARRIER();
        buf ^= 1;
    }
    if (tid < SKEL_R && row0 + tid < skel_base + n) {
        if (SKEL_LN_REDO(acc)) SKEL_LN_REFOLD(acc, row0 + tid, 0, k_end);
        SKEL_LN_OUT(row0 + tid - skel_base) = acc;
    }
}
#endif
