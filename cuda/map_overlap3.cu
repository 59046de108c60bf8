// MapOverlap 3D over a d0 x d1 x d2 tensor (k fastest). Defines: SKEL_IN_T, SKEL_OUT_T,
// SKEL_CALL(w) (the user call with the window's centre pointer; the strides SKEL_S0/SKEL_S1
// and radii SKEL_R0..SKEL_R2 are the macros below), SKEL_PARAMS (uniforms); the block
// SKEL_BX x SKEL_BY outputs of one plane (along k, j) and SKEL_PZ planes per block.
//
// A block marches through its SKEL_PZ planes i: shared memory holds the 2 SKEL_R0 + 1
// planes of the tile (SKEL_BY + 2 SKEL_R1 rows of SKEL_BX + 2 SKEL_R2) that plane i's
// windows read, so each step loads one new plane from global memory, not all of them.
// Each plane is stored twice, at ring slots s and s + SKEL_PD, so the window's planes are
// always consecutive slots (a fixed stride SKEL_S0) without shifting data.
// A tile whose halo lies inside the tensor reads global memory directly; only border tiles
// apply the edge mode `edge` (0 duplicate, 1 cyclic, 2 pad, 3 none: outputs whose window
// leaves the tensor are not written). A MultiStream chunk computes planes plane_lo ..
// plane_hi, reading its halo planes (uploaded with it, wrapped for a cyclic edge).

#define SKEL_PW (SKEL_BX + 2 * SKEL_R2)
#define SKEL_PH (SKEL_BY + 2 * SKEL_R1)
#define SKEL_PD (2 * SKEL_R0 + 1)
#define SKEL_S1 SKEL_PW
#define SKEL_S0 (SKEL_PH * SKEL_PW)
#define SKEL_NT (SKEL_BX * SKEL_BY)

__device__ __forceinline__ skel_i64 skel_wrap3(skel_i64 i, skel_i64 n) {
    skel_i64 r = i % n;
    return r < 0 ? r + n : r;
}

__device__ __forceinline__ skel_i64 skel_clamp3(skel_i64 i, skel_i64 n) {
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

// The element at (gi, gj, gk), which may lie outside the tensor: there the edge mode says
// what is read (pad also for edge 3, whose outputs there are not written).
__device__ __forceinline__ SKEL_IN_T skel_fetch3(const SKEL_IN_T* __restrict__ in, skel_i64 gi,
                                                 skel_i64 gj, skel_i64 gk, skel_i64 d0,
                                                 skel_i64 d1, skel_i64 d2, int edge,
                                                 SKEL_IN_T pad) {
    if (gi >= 0 && gi < d0 && gj >= 0 && gj < d1 && gk >= 0 && gk < d2)
        return in[(gi * d1 + gj) * d2 + gk];
    if (edge == 0)
        return in[(skel_clamp3(gi, d0) * d1 + skel_clamp3(gj, d1)) * d2 + skel_clamp3(gk, d2)];
    if (edge == 1)
        return in[(skel_wrap3(gi, d0) * d1 + skel_wrap3(gj, d1)) * d2 + skel_wrap3(gk, d2)];
    return pad;
}

extern "C" __global__ void __launch_bounds__(SKEL_NT)
skel_overlap3(const SKEL_IN_T* __restrict__ in, SKEL_OUT_T* __restrict__ out, skel_i64 d0,
              skel_i64 d1, skel_i64 d2, int edge, SKEL_IN_T pad, skel_i64 tiles_x,
              skel_i64 tiles_y, skel_i64 plane_lo, skel_i64 plane_hi SKEL_PARAMS SKEL_FP) {
    extern __shared__ __align__(16) unsigned char skel_smem[];
    SKEL_IN_T* ring = reinterpret_cast<SKEL_IN_T*>(skel_smem);
    const int tid = threadIdx.y * SKEL_BX + threadIdx.x;
    const skel_i64 runs = (plane_hi - plane_lo + SKEL_PZ - 1) / SKEL_PZ;
    for (skel_i64 run = blockIdx.z; run < runs; run += gridDim.z) {
        const skel_i64 i_lo = plane_lo + run * SKEL_PZ;
        const skel_i64 i_hi = i_lo + SKEL_PZ < plane_hi ? i_lo + SKEL_PZ : plane_hi;
        for (skel_i64 ty_ = blockIdx.y; ty_ < tiles_y; ty_ += gridDim.y) {
            for (skel_i64 tx_ = blockIdx.x; tx_ < tiles_x; tx_ += gridDim.x) {
                const skel_i64 j0 = ty_ * SKEL_BY, k0 = tx_ * SKEL_BX;
                // The tile's rows and columns with their halo lie inside the tensor.
                const bool inner_jk = j0 >= SKEL_R1 && j0 + SKEL_BY + SKEL_R1 <= d1 &&
                                      k0 >= SKEL_R2 && k0 + SKEL_BX + SKEL_R2 <= d2;
                const skel_i64 j = j0 + threadIdx.y, k = k0 + threadIdx.x;
                const bool mine = j < d1 && k < d2;
                const bool inside_jk = j >= SKEL_R1 && j < d1 - SKEL_R1 && k >= SKEL_R2 &&
                                       k < d2 - SKEL_R2;
                // Loads plane `p` (global index, may lie outside) into its two slots.
                #define SKEL_LOAD_PLANE(p)                                                     \
                    do {                                                                       \
                        const skel_i64 gi_ = (p);                                              \
                        const int s_ = (int)skel_wrap3(gi_, SKEL_PD);                          \
                        const bool in_ = inner_jk && gi_ >= 0 && gi_ < d0;                     \
                        for (int e = tid; e < SKEL_S0; e += SKEL_NT) {                         \
                            const int y = e / SKEL_PW, x = e - y * SKEL_PW;                    \
                            const skel_i64 gj = j0 - SKEL_R1 + y, gk = k0 - SKEL_R2 + x;       \
                            const SKEL_IN_T v = in_ ? in[(gi_ * d1 + gj) * d2 + gk]            \
                                                    : skel_fetch3(in, gi_, gj, gk, d0, d1, d2, \
                                                                  edge, pad);                  \
                            ring[s_ * SKEL_S0 + e] = v;                                        \
                            ring[(s_ + SKEL_PD) * SKEL_S0 + e] = v;                            \
                        }                                                                      \
                    } while (0)
                __syncthreads();
                for (skel_i64 p = i_lo - SKEL_R0; p < i_lo + SKEL_R0; ++p) SKEL_LOAD_PLANE(p);
                for (skel_i64 i = i_lo; i < i_hi; ++i) {
                    SKEL_LOAD_PLANE(i + SKEL_R0);
                    __syncthreads();
                    const bool inside = inside_jk && i >= SKEL_R0 && i < d0 - SKEL_R0;
                    if (mine && (edge != 3 || inside)) {
                        const int first = (int)skel_wrap3(i - SKEL_R0, SKEL_PD);
                        const SKEL_IN_T* w = ring + (first + SKEL_R0) * SKEL_S0 +
                                             (threadIdx.y + SKEL_R1) * SKEL_PW + threadIdx.x +
                                             SKEL_R2;
                        out[(i * d1 + j) * d2 + k] = SKEL_CALL(w);
                    }
                    // The next step overwrites the slots of plane i - R0.
                    __syncthreads();
                }
                #undef SKEL_LOAD_PLANE
            }
        }
    }
}
