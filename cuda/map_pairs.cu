// MapPairs and MapPairsReduce: f(v[i], h[j]) for every pair of a vertical vector v and a
// horizontal vector h, tiled through shared memory.
// Defines: SKEL_A_T, SKEL_B_T (element types of v and h), SKEL_OUT_T, SKEL_PARAMS (the
// uniforms, each preceded by a comma), SKEL_CALL (the user call; it reads its v element as
// in0[0], its h element as in1[0], the pair's flat position skel_flat = i * cols + j);
// for MapPairsReduce also SKEL_OP(a, b) (the reduce function) and SKEL_COLS (0: one
// result per row of pairs, 1: one per column). Block shapes: SKEL_TX x SKEL_TY threads
// computing SKEL_IY rows each (MapPairs), SKEL_RB threads (MapPairsReduce).

#define SKEL_TR (SKEL_TY * SKEL_IY)
#define SKEL_TC SKEL_TX

// MapPairs: a block computes a tile of SKEL_TR x SKEL_TC outputs (SKEL_IY rows per
// thread). It first stages the tile's SKEL_TR elements of v and SKEL_TC elements of h in
// shared memory, so each input element is read from device memory once per tile, not once
// per pair; a warp then writes 32 consecutive outputs of a row. A MultiStream chunk is the
// band of rows row_base .. row_base + rows: `out` and `v` point at its first row, `h` at
// the whole of h (cols elements).
extern "C" __global__ void __launch_bounds__(SKEL_TX * SKEL_TY)
skel_map_pairs(SKEL_OUT_T* __restrict__ out, const SKEL_A_T* __restrict__ v,
               const SKEL_B_T* __restrict__ h, skel_u64 rows, skel_u64 cols, skel_u64 row_base,
               skel_u64 tiles_x, skel_u64 tiles_y SKEL_PARAMS SKEL_FP) {
    __shared__ SKEL_A_T sv[SKEL_TR];
    __shared__ SKEL_B_T sh[SKEL_TC];
    const unsigned tid = threadIdx.y * SKEL_TX + threadIdx.x;
    for (skel_u64 ty_ = blockIdx.y; ty_ < tiles_y; ty_ += gridDim.y) {
        for (skel_u64 tx_ = blockIdx.x; tx_ < tiles_x; tx_ += gridDim.x) {
            const skel_u64 r0 = ty_ * SKEL_TR, c0 = tx_ * SKEL_TC;
            __syncthreads();
            if (tid < SKEL_TR) {
                if (r0 + tid < rows) sv[tid] = v[r0 + tid];
            } else if (tid < SKEL_TR + SKEL_TC) {
                const unsigned k = tid - SKEL_TR;
                if (c0 + k < cols) sh[k] = h[c0 + k];
            }
            __syncthreads();
            const skel_u64 j = c0 + threadIdx.x;
            if (j < cols) {
                const SKEL_B_T* in1 = &sh[threadIdx.x];
#pragma unroll
                for (int k = 0; k < SKEL_IY; ++k) {
                    const unsigned ly = threadIdx.y + k * SKEL_TY;
                    const skel_u64 i = r0 + ly;
                    if (i < rows) {
                        const SKEL_A_T* in0 = &sv[ly];
                        const skel_u64 skel_flat = (row_base + i) * cols + j;
                        (void)skel_flat;
                        out[i * cols + j] = SKEL_CALL;
                    }
                }
            }
        }
    }
}

#ifdef SKEL_OP

#if SKEL_COLS
#define SKEL_OWN_T SKEL_B_T
#define SKEL_OTHER_T SKEL_A_T
#else
#define SKEL_OWN_T SKEL_A_T
#define SKEL_OTHER_T SKEL_B_T
#endif

// MapPairsReduce: thread t of a block owns one result (a row of pairs, or a column with
// SKEL_COLS) and folds its pairs strictly in order of the other index, so the reduce
// function needs no commutativity. The block stages the other operand in shared memory
// SKEL_RB elements at a time (each read from device memory once per block and tile, then
// broadcast to all threads). blockIdx.y picks a segment [k0, k0 + seg_len) of the folded
// range: with one segment (parts == 0) the result goes to out; with several, segment s
// writes its partial to parts[s * n_own + o] and skel_pairs_combine folds the segments in
// order. A MultiStream chunk owns results own_base .. own_base + n_own: `out` and `own`
// point at its first, `other` at the whole other operand (n_fold elements); `cols` is
// h's length (for the pair's flat position).
extern "C" __global__ void __launch_bounds__(SKEL_RB)
skel_pairs_fold(SKEL_OUT_T* __restrict__ out, const SKEL_OWN_T* __restrict__ own,
                const SKEL_OTHER_T* __restrict__ other, skel_u64 n_own, skel_u64 n_fold,
                skel_u64 own_base, skel_u64 cols, skel_u64 seg_len, skel_u64 tiles,
                SKEL_OUT_T* __restrict__ parts SKEL_PARAMS SKEL_FP) {
    __shared__ SKEL_OTHER_T so[SKEL_RB];
    const skel_u64 k0 = (skel_u64)blockIdx.y * seg_len;
    const skel_u64 k1 = min(n_fold, k0 + seg_len);
    for (skel_u64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const skel_u64 o = t * SKEL_RB + threadIdx.x;
        const bool live = o < n_own;
        SKEL_OWN_T mine = live ? own[o] : skel_zero<SKEL_OWN_T>();
        SKEL_OUT_T acc = skel_zero<SKEL_OUT_T>();
        for (skel_u64 base = k0; base < k1; base += SKEL_RB) {
            const unsigned len = (unsigned)min((skel_u64)SKEL_RB, k1 - base);
            __syncthreads();
            if (threadIdx.x < len) so[threadIdx.x] = other[base + threadIdx.x];
            __syncthreads();
            if (!live) continue;
            // The pair of this thread's result with staged element k.
            auto pair = [&](unsigned k) -> SKEL_OUT_T {
#if SKEL_COLS
                const SKEL_A_T* in0 = &so[k];
                const SKEL_B_T* in1 = &mine;
                const skel_u64 skel_flat = (base + k) * cols + own_base + o;
#else
                const SKEL_A_T* in0 = &mine;
                const SKEL_B_T* in1 = &so[k];
                const skel_u64 skel_flat = (own_base + o) * cols + base + k;
#endif
                (void)skel_flat;
                return SKEL_CALL;
            };
            unsigned k = 0;
            if (base == k0) acc = pair(k++);
            for (; k < len; ++k) acc = SKEL_OP(acc, pair(k));
        }
        if (live) {
            if (parts) parts[(skel_u64)blockIdx.y * n_own + o] = acc;
            else out[o] = acc;
        }
    }
}

// out[o] = parts[o] (+) parts[n_own + o] (+) ... over `segs` segments, in order.
extern "C" __global__ void __launch_bounds__(SKEL_RB)
skel_pairs_combine(SKEL_OUT_T* __restrict__ out, const SKEL_OUT_T* __restrict__ parts,
                   skel_u64 n_own, skel_u64 segs SKEL_FP) {
    const skel_u64 stride = (skel_u64)gridDim.x * blockDim.x;
    for (skel_u64 o = (skel_u64)blockIdx.x * blockDim.x + threadIdx.x; o < n_own; o += stride) {
        SKEL_OUT_T acc = parts[o];
        for (skel_u64 s = 1; s < segs; ++s) acc = SKEL_OP(acc, parts[s * n_own + o]);
        out[o] = acc;
    }
}
#endif
