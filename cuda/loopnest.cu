// Reduction loop nests (src/codegen/loopnest.rs): matrix products and matrix-vector products
// written as an index Map over container arguments. One source for both GPU backends: the
// OpenCL backend compiles this file too (the prologue below picks the dialect).
//
// Defines from the backend: SKEL_LN_T / SKEL_LN_TA / SKEL_LN_TB (result and operand types),
// SKEL_LN_OUT_PARAMS and SKEL_LN_OUT(i) (the output and its element i), SKEL_LN_PARAMS (the
// container arguments and uniforms, each preceded by a comma), SKEL_LN_A(r, l) and
// SKEL_LN_B(l, c) (operand reads, indices clamped as the unchecked user function clamps
// them), SKEL_LN_A_PTR / SKEL_LN_A_ROWS / SKEL_LN_A_COLS and SKEL_LN_X_LEN (the first
// operand's pointer and shape, the vector's length), SKEL_LN_A_RAW / SKEL_LN_B_RAW (the
// same reads unclamped) and SKEL_LN_A_FITS /
// SKEL_LN_B_FITS(ends) (whether indices below those ends are inside the operand), SKEL_LN_K (the trip count), SKEL_LN_INIT (the accumulator's start) and
// SKEL_LN_STEP(acc, x, y) (one step of the user's accumulation, its own operations),
// SKEL_LN_FSTEP(acc, x, y) (the step the tiles take: SKEL_LN_STEP, or for a min/max step a
// plain select) and SKEL_LN_REDO(v) (whether a final value of SKEL_LN_FSTEP must be folded
// again with SKEL_LN_STEP; see loopnest_kernels.rs).
// SKEL_LN_GEMM with SKEL_LN_NAME, SKEL_BM, SKEL_BN, SKEL_BK, SKEL_TM, SKEL_TN selects a
// matrix-product kernel (the file is then included once per tile shape); SKEL_LN_GEMV with
// SKEL_LN_NAME, SKEL_GR (rows per band), SKEL_CH (steps per chunk), SKEL_VW (elements of
// the matrix per 16 bytes) and SKEL_NS (stages of the cp.async ring) a matrix-vector
// kernel (included once per band height), with SKEL_LN_X_PTR the vector's pointer.
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
#define SKEL_LN_KERNEL_WARP __kernel __attribute__((reqd_work_group_size(32, 1, 1))) void
#define SKEL_LN_GLOBAL __global
#define SKEL_LN_LOCAL_PTR __local
#define SKEL_LN_LOCAL __local
#define SKEL_LN_ALIGN16 __attribute__((aligned(16)))
#define SKEL_LN_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define SKEL_LN_TID ((int)get_local_id(0))
#define SKEL_LN_BX ((skel_ln_u64)get_group_id(0))
#define SKEL_LN_BY ((skel_ln_u64)get_group_id(1))
#else
typedef unsigned long long skel_ln_u64;
#define SKEL_LN_KERNEL extern "C" __global__ void __launch_bounds__(256)
#define SKEL_LN_KERNEL_WARP extern "C" __global__ void __launch_bounds__(32)
#define SKEL_LN_GLOBAL
#define SKEL_LN_LOCAL_PTR
#define SKEL_LN_LOCAL __shared__
#define SKEL_LN_ALIGN16 __align__(16)
#define SKEL_LN_BARRIER() __syncthreads()
#define SKEL_LN_TID ((int)threadIdx.x)
#define SKEL_LN_BX ((skel_ln_u64)blockIdx.x)
#define SKEL_LN_BY ((skel_ln_u64)blockIdx.y)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// Asynchronous copies global -> shared memory (sm_80+): no registers hold the data on its
// way, so many chunks can be in flight. 16 bytes through L2 only (a matrix is read once);
// 4 or 8 bytes (rows not 16-byte aligned) through L1. A group per commit; a wait leaves
// the newest SKEL_NS - 2 groups of this thread in flight.
#define SKEL_LN_CP_ASYNC 1
SKEL_FN void skel_ln_cp16(void* s, const void* g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)), "l"(g) : "memory");
}
SKEL_FN void skel_ln_cp4(void* s, const void* g) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)), "l"(g) : "memory");
}
SKEL_FN void skel_ln_cp8(void* s, const void* g) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)), "l"(g) : "memory");
}
#define skel_ln_cp_one(s, g) do { if (sizeof(*(g)) == 4) skel_ln_cp4((s), (g)); else if (sizeof(*(g)) == 8) skel_ln_cp8((s), (g)); } while (0)
#define skel_ln_cp_commit() asm volatile("cp.async.commit_group;\n" ::: "memory")
#define skel_ln_cp_wait() asm volatile("cp.async.wait_group %0;\n" ::"n"(SKEL_NS - 2) : "memory")
#endif
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
// A block of one warp per band of SKEL_GR rows (32, 16 or 8: the host picks the band that
// still gives every multiprocessor several blocks); thread t < SKEL_GR folds row t's steps
// in ascending l, as the cpu backend does. A row's sum is one chain of roundings, so a row
// is never split between threads: the bytes in flight, not the arithmetic, set the speed.
// The band is read in chunks of SKEL_CH steps (SKEL_GR x SKEL_CH is 8 KiB of the matrix for
// 4- and 8-byte elements), coalesced by all 32 lanes: 16-byte vectors where every row
// starts 16-byte aligned (aligned base, rows a multiple of 16 bytes long), else consecutive
// elements of a row, clamped reads at the borders. In shared memory a row is padded by one
// vector, so the vector stores and each folding thread's vector reads of its own row are
// free of bank conflicts; the vector's run lies beside it.
// On CUDA sm_80+ (SKEL_LN_CP_ASYNC) chunks go straight to a ring of SKEL_NS shared-memory
// stages with cp.async: SKEL_NS - 1 chunks (24 KiB) in flight per block without registers,
// so a multiprocessor with three or four bands keeps the ~30 KiB that its share of the
// memory bandwidth needs on the way even while it folds. Elsewhere (OpenCL, older GPUs)
// chunks go global -> registers -> shared memory, two register sets taking chunks in turn.
#ifndef SKEL_LN_VEC_DEFINED
#define SKEL_LN_VEC_DEFINED
// 16 bytes of the matrix, moved as one vector (a uint4 in both dialects).
typedef union { uint4 q; SKEL_LN_TA e[SKEL_VW]; } skel_ln_vec;
#endif
// Steps per chunk: half a chunk where registers carry it (two sets of the whole chunk
// would spill).
#ifdef SKEL_LN_CP_ASYNC
#define SKEL_LN_C SKEL_CH
#else
#define SKEL_LN_C (SKEL_CH / 2)
#endif
#define SKEL_LN_CHV (SKEL_LN_C / SKEL_VW)
#define SKEL_LN_SROW (SKEL_LN_C + SKEL_VW)
// Vectors and elements of the matrix per chunk, and each lane's share of them.
#define SKEL_LN_MV (SKEL_GR * SKEL_LN_CHV)
#define SKEL_LN_MVT ((SKEL_LN_MV + 31) / 32)
#define SKEL_LN_ME (SKEL_GR * SKEL_LN_C)
#define SKEL_LN_MET ((SKEL_LN_ME + 31) / 32)
// Row r of the band, clamped into the matrix for the unclamped reads (rows > 0 there): a
// row past the end reads the last, as the clamped read does.
#define SKEL_LN_ROWC(r) (row0 + (r) < rows ? row0 + (r) : rows - 1)
SKEL_LN_KERNEL_WARP SKEL_LN_NAME(SKEL_LN_OUT_PARAMS, skel_ln_u64 n, skel_ln_u64 cols, skel_ln_u64 skel_base SKEL_LN_PARAMS)
{
    (void)cols;
    const int tid = SKEL_LN_TID;
    const skel_ln_u64 row0 = skel_base + SKEL_LN_BX * SKEL_GR;
    const skel_ln_u64 k_end = SKEL_LN_K;
    const skel_ln_u64 rows = SKEL_LN_A_ROWS;
    const skel_ln_u64 a_cols = SKEL_LN_A_COLS;
    // Steps read without clamps: inside the matrix's columns and the vector.
    skel_ln_u64 k_fit = rows == 0 ? 0 : k_end;
    if (k_fit > a_cols) k_fit = a_cols;
    if (k_fit > SKEL_LN_X_LEN) k_fit = SKEL_LN_X_LEN;
    const int vec = (skel_ln_u64)(size_t)SKEL_LN_A_PTR % 16 == 0 && a_cols * sizeof(SKEL_LN_TA) % 16 == 0;
    const skel_ln_u64 chunks = (k_end + SKEL_LN_C - 1) / SKEL_LN_C;
    SKEL_LN_T acc = SKEL_LN_INIT;
#ifdef SKEL_LN_CP_ASYNC
    __shared__ __align__(16) SKEL_LN_TA Ms[SKEL_NS][SKEL_GR * SKEL_LN_SROW];
    __shared__ __align__(16) SKEL_LN_TB Xs[SKEL_NS][SKEL_LN_C];
    // The vector in 16-byte pieces where it is aligned (a chunk of it is a multiple of 16
    // bytes); 4- and 8-byte elements may also be copied one by one.
    const int xvec = (skel_ln_u64)(size_t)SKEL_LN_X_PTR % 16 == 0 && SKEL_LN_C * sizeof(SKEL_LN_TB) % 16 == 0;
    const int a_one = sizeof(SKEL_LN_TA) == 4 || sizeof(SKEL_LN_TA) == 8;
    const int x_one = sizeof(SKEL_LN_TB) == 4 || sizeof(SKEL_LN_TB) == 8;
    // Iteration c copies chunk c into stage ls and folds chunk c - (SKEL_NS - 1) from stage
    // fs: stage ls was last read by the fold of the iteration before, which the barrier
    // below has seen finished; the copies of the chunk folded were waited for (each lane
    // its own, then the barrier for the others').
    int ls = 0, fs = 0;
    for (skel_ln_u64 c = 0; c < chunks + (SKEL_NS - 1); ++c) {
        const int fold = c >= SKEL_NS - 1;
        if (fold) {
            skel_ln_cp_wait();
            SKEL_LN_BARRIER();
        }
        if (c < chunks) {
            const skel_ln_u64 k0 = c * SKEL_LN_C;
            const int fit = k0 + SKEL_LN_C <= k_fit;
            SKEL_LN_TA* ms = Ms[ls];
            SKEL_LN_TB* xs = Xs[ls];
            if (fit && vec) {
#pragma unroll
                for (int v = 0; v < SKEL_LN_MVT; ++v) {
                    const int e = v * 32 + tid;
                    if (SKEL_LN_MV % 32 == 0 || e < SKEL_LN_MV)
                        skel_ln_cp16(ms + (e / SKEL_LN_CHV) * SKEL_LN_SROW + (e % SKEL_LN_CHV) * SKEL_VW,
                                     SKEL_LN_A_PTR + SKEL_LN_ROWC(e / SKEL_LN_CHV) * a_cols + k0 + (e % SKEL_LN_CHV) * SKEL_VW);
                }
            } else if (fit && a_one) {
#pragma unroll 8
                for (int s = 0; s < SKEL_LN_MET; ++s) {
                    const int e = s * 32 + tid;
                    if (SKEL_LN_ME % 32 == 0 || e < SKEL_LN_ME)
                        skel_ln_cp_one(ms + (e / SKEL_LN_C) * SKEL_LN_SROW + e % SKEL_LN_C,
                                       SKEL_LN_A_PTR + SKEL_LN_ROWC(e / SKEL_LN_C) * a_cols + k0 + e % SKEL_LN_C);
                }
            } else {
                // Borders (clamped) and 1- or 2-byte elements of unaligned rows: plain
                // loads, stored before the barrier that precedes their fold.
                for (int s = 0; s < SKEL_LN_MET; ++s) {
                    const int e = s * 32 + tid;
                    if (SKEL_LN_ME % 32 == 0 || e < SKEL_LN_ME)
                        ms[(e / SKEL_LN_C) * SKEL_LN_SROW + e % SKEL_LN_C] =
                            fit ? SKEL_LN_A_RAW(SKEL_LN_ROWC(e / SKEL_LN_C), k0 + e % SKEL_LN_C)
                                : SKEL_LN_A(row0 + e / SKEL_LN_C, k0 + e % SKEL_LN_C);
                }
            }
            if (fit && xvec) {
                const int xv = SKEL_LN_C * sizeof(SKEL_LN_TB) / 16;
                for (int e = tid; e < xv; e += 32)
                    skel_ln_cp16(xs + e * (16 / sizeof(SKEL_LN_TB)), SKEL_LN_X_PTR + k0 + e * (16 / sizeof(SKEL_LN_TB)));
            } else if (fit && x_one) {
                for (int e = tid; e < SKEL_LN_C; e += 32) skel_ln_cp_one(xs + e, SKEL_LN_X_PTR + k0 + e);
            } else {
                for (int e = tid; e < SKEL_LN_C; e += 32)
                    xs[e] = fit ? SKEL_LN_B_RAW(k0 + e, 0) : SKEL_LN_B(k0 + e, 0);
            }
        }
        // One group per iteration, empty or not, so that the wait's count holds.
        skel_ln_cp_commit();
        if (++ls == SKEL_NS) ls = 0;
        if (fold && tid < SKEL_GR) {
            const skel_ln_u64 k0 = (c - (SKEL_NS - 1)) * SKEL_LN_C;
            const SKEL_LN_TA* ms = Ms[fs];
            const SKEL_LN_TB* xs = Xs[fs];
            if (k0 + SKEL_LN_C <= k_end) {
#pragma unroll
                for (int v = 0; v < SKEL_LN_CHV; ++v) {
                    skel_ln_vec m;
                    m.q = *(const uint4*)(ms + tid * SKEL_LN_SROW + v * SKEL_VW);
#pragma unroll
                    for (int q = 0; q < SKEL_VW; ++q) acc = SKEL_LN_FSTEP(acc, m.e[q], xs[v * SKEL_VW + q]);
                }
            } else {
                const int kt = (int)(k_end - k0);
                for (int k = 0; k < kt; ++k) acc = SKEL_LN_FSTEP(acc, ms[tid * SKEL_LN_SROW + k], xs[k]);
            }
        }
        if (fold && ++fs == SKEL_NS) fs = 0;
    }
#else
    SKEL_LN_LOCAL SKEL_LN_ALIGN16 SKEL_LN_TA Ms[SKEL_GR * SKEL_LN_SROW];
    SKEL_LN_LOCAL SKEL_LN_TB Xs[SKEL_LN_C];
    // Register set h holds chunks h, h + 2, h + 4, ...
    SKEL_LN_TA rm[2][SKEL_LN_MVT * SKEL_VW];
    SKEL_LN_TB rx[2][(SKEL_LN_C + 31) / 32];
    // Round c loads chunks c and c + 1 and folds chunks c - 2 and c - 1.
    for (skel_ln_u64 c = 0; c < chunks + 2; c += 2) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const skel_ln_u64 j = c + h;
            const int fold = c >= 2 && j - 2 < chunks;
            if (fold) {
                // Set h holds chunk j - 2: into shared memory in the layout of its load.
                const skel_ln_u64 k0 = (j - 2) * SKEL_LN_C;
                if (k0 + SKEL_LN_C <= k_fit && vec) {
#pragma unroll
                    for (int v = 0; v < SKEL_LN_MVT; ++v) {
                        const int e = v * 32 + tid;
                        skel_ln_vec u;
#pragma unroll
                        for (int q = 0; q < SKEL_VW; ++q) u.e[q] = rm[h][v * SKEL_VW + q];
                        if (SKEL_LN_MV % 32 == 0 || e < SKEL_LN_MV)
                            *(SKEL_LN_LOCAL_PTR uint4*)(Ms + (e / SKEL_LN_CHV) * SKEL_LN_SROW + (e % SKEL_LN_CHV) * SKEL_VW) = u.q;
                    }
                } else {
#pragma unroll
                    for (int s = 0; s < SKEL_LN_MET; ++s) {
                        const int e = s * 32 + tid;
                        if (SKEL_LN_ME % 32 == 0 || e < SKEL_LN_ME) Ms[(e / SKEL_LN_C) * SKEL_LN_SROW + e % SKEL_LN_C] = rm[h][s];
                    }
                }
#pragma unroll
                for (int s = 0; s < (SKEL_LN_C + 31) / 32; ++s)
                    if (SKEL_LN_C % 32 == 0 || s * 32 + tid < SKEL_LN_C) Xs[s * 32 + tid] = rx[h][s];
                SKEL_LN_BARRIER();
            }
            if (j < chunks) {
                // Chunk j into set h, its loads in flight while chunks j - 2 and j - 1 fold.
                const skel_ln_u64 k0 = j * SKEL_LN_C;
                const int fit = k0 + SKEL_LN_C <= k_fit;
                if (fit && vec) {
#pragma unroll
                    for (int v = 0; v < SKEL_LN_MVT; ++v) {
                        const int e = v * 32 + tid;
                        skel_ln_vec u;
                        if (SKEL_LN_MV % 32 == 0 || e < SKEL_LN_MV)
                            u.q = *(const SKEL_LN_GLOBAL uint4*)(SKEL_LN_A_PTR + SKEL_LN_ROWC(e / SKEL_LN_CHV) * a_cols + k0 + (e % SKEL_LN_CHV) * SKEL_VW);
#pragma unroll
                        for (int q = 0; q < SKEL_VW; ++q) rm[h][v * SKEL_VW + q] = u.e[q];
                    }
                } else if (fit) {
#pragma unroll
                    for (int s = 0; s < SKEL_LN_MET; ++s) {
                        const int e = s * 32 + tid;
                        if (SKEL_LN_ME % 32 == 0 || e < SKEL_LN_ME) rm[h][s] = SKEL_LN_A_RAW(SKEL_LN_ROWC(e / SKEL_LN_C), k0 + e % SKEL_LN_C);
                    }
                } else {
#pragma unroll
                    for (int s = 0; s < SKEL_LN_MET; ++s) {
                        const int e = s * 32 + tid;
                        if (SKEL_LN_ME % 32 == 0 || e < SKEL_LN_ME) rm[h][s] = SKEL_LN_A(row0 + e / SKEL_LN_C, k0 + e % SKEL_LN_C);
                    }
                }
#pragma unroll
                for (int s = 0; s < (SKEL_LN_C + 31) / 32; ++s)
                    if (SKEL_LN_C % 32 == 0 || s * 32 + tid < SKEL_LN_C)
                        rx[h][s] = fit ? SKEL_LN_B_RAW(k0 + s * 32 + tid, 0) : SKEL_LN_B(k0 + s * 32 + tid, 0);
            }
            if (fold) {
                // Thread tid < SKEL_GR folds its row's steps of chunk j - 2 (those below
                // k_end).
                const skel_ln_u64 k0 = (j - 2) * SKEL_LN_C;
                if (tid < SKEL_GR) {
                    if (k0 + SKEL_LN_C <= k_end) {
#pragma unroll
                        for (int v = 0; v < SKEL_LN_CHV; ++v) {
                            skel_ln_vec m;
                            m.q = *(SKEL_LN_LOCAL_PTR const uint4*)(Ms + tid * SKEL_LN_SROW + v * SKEL_VW);
#pragma unroll
                            for (int q = 0; q < SKEL_VW; ++q) acc = SKEL_LN_FSTEP(acc, m.e[q], Xs[v * SKEL_VW + q]);
                        }
                    } else {
                        const int kt = (int)(k_end - k0);
                        for (int k = 0; k < kt; ++k) acc = SKEL_LN_FSTEP(acc, Ms[tid * SKEL_LN_SROW + k], Xs[k]);
                    }
                }
                // The next round's stores overwrite what this one read.
                SKEL_LN_BARRIER();
            }
        }
    }
#endif
    if (tid < SKEL_GR && row0 + tid < skel_base + n) {
        if (SKEL_LN_REDO(acc)) SKEL_LN_REFOLD(acc, row0 + tid, 0, k_end);
        SKEL_LN_OUT(row0 + tid - skel_base) = acc;
    }
}
#undef SKEL_LN_C
#undef SKEL_LN_CHV
#undef SKEL_LN_SROW
#undef SKEL_LN_MV
#undef SKEL_LN_MVT
#undef SKEL_LN_ME
#undef SKEL_LN_MET
#undef SKEL_LN_ROWC
#endif
