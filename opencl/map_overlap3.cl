// MapOverlap 3D over a d0 x d1 x d2 tensor (k fastest); the OpenCL twin of
// cuda/map_overlap3.cu (same marching scheme). Instantiated with: SKEL_T (element),
// SKEL_OUT_T, SKEL_UPARAMS, SKEL_CALL(w) (the user call with the window's centre pointer;
// the strides SKEL_S0/SKEL_S1 and radii SKEL_R0..SKEL_R2 are the macros below), the
// work-group SKEL_BX x SKEL_BY outputs of one plane (along k, j) and SKEL_PZ planes per
// work-group.
//
// A work-group marches through its planes: local memory holds the 2 SKEL_R0 + 1 tile
// planes that plane i's windows read, each stored twice (ring slots s and s + SKEL_PD) so
// that the window's planes are consecutive slots at the fixed stride SKEL_S0; each step
// loads one new plane. Border tiles apply the edge mode `edge` (0 duplicate, 1 cyclic,
// 2 pad, 3 none: outputs whose window leaves the tensor are not written).

#define SKEL_PW (SKEL_BX + 2 * SKEL_R2)
#define SKEL_PH (SKEL_BY + 2 * SKEL_R1)
#define SKEL_PD (2 * SKEL_R0 + 1)
#define SKEL_S1 SKEL_PW
#define SKEL_S0 (SKEL_PH * SKEL_PW)
#define SKEL_NT (SKEL_BX * SKEL_BY)

static inline long skel_wrap3(long i, long n) {
    long r = i % n;
    return r < 0 ? r + n : r;
}

static inline long skel_clamp3(long i, long n) {
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

static inline SKEL_T skel_fetch3(__global const SKEL_T* in, long gi, long gj, long gk, long d0,
                                 long d1, long d2, int edge, SKEL_T pad) {
    if (gi >= 0 && gi < d0 && gj >= 0 && gj < d1 && gk >= 0 && gk < d2)
        return in[(gi * d1 + gj) * d2 + gk];
    if (edge == 0)
        return in[(skel_clamp3(gi, d0) * d1 + skel_clamp3(gj, d1)) * d2 + skel_clamp3(gk, d2)];
    if (edge == 1)
        return in[(skel_wrap3(gi, d0) * d1 + skel_wrap3(gj, d1)) * d2 + skel_wrap3(gk, d2)];
    return pad;
}

__kernel __attribute__((reqd_work_group_size(SKEL_BX, SKEL_BY, 1)))
void skel_map_overlap3(__global const SKEL_T* in_buf, ulong in_off, __global SKEL_OUT_T* out_buf,
                       ulong out_off, long d0, long d1, long d2, int edge, SKEL_T pad,
                       __local SKEL_T* ring SKEL_UPARAMS)
{
    __global const SKEL_T* in = in_buf + in_off;
    __global SKEL_OUT_T* out = out_buf + out_off;
    const int lx = (int)get_local_id(0), ly = (int)get_local_id(1);
    const int tid = ly * SKEL_BX + lx;
    const long k0 = (long)get_group_id(0) * SKEL_BX, j0 = (long)get_group_id(1) * SKEL_BY;
    const long i_lo = (long)get_group_id(2) * SKEL_PZ;
    const long i_hi = i_lo + SKEL_PZ < d0 ? i_lo + SKEL_PZ : d0;
    const bool inner_jk = j0 >= SKEL_R1 && j0 + SKEL_BY + SKEL_R1 <= d1 && k0 >= SKEL_R2 &&
                          k0 + SKEL_BX + SKEL_R2 <= d2;
    const long j = j0 + ly, k = k0 + lx;
    const bool mine = j < d1 && k < d2;
    const bool inside_jk = j >= SKEL_R1 && j < d1 - SKEL_R1 && k >= SKEL_R2 && k < d2 - SKEL_R2;
#define SKEL_LOAD_PLANE(p)                                                                   \
    do {                                                                                     \
        const long gi_ = (p);                                                                \
        const int s_ = (int)skel_wrap3(gi_, SKEL_PD);                                        \
        const bool in_ = inner_jk && gi_ >= 0 && gi_ < d0;                                   \
        for (int e = tid; e < SKEL_S0; e += SKEL_NT) {                                       \
            const int y = e / SKEL_PW, x = e - y * SKEL_PW;                                  \
            const long gj = j0 - SKEL_R1 + y, gk = k0 - SKEL_R2 + x;                         \
            const SKEL_T v = in_ ? in[(gi_ * d1 + gj) * d2 + gk]                             \
                                 : skel_fetch3(in, gi_, gj, gk, d0, d1, d2, edge, pad);      \
            ring[s_ * SKEL_S0 + e] = v;                                                      \
            ring[(s_ + SKEL_PD) * SKEL_S0 + e] = v;                                          \
        }                                                                                    \
    } while (0)
    for (long p = i_lo - SKEL_R0; p < i_lo + SKEL_R0; ++p) SKEL_LOAD_PLANE(p);
    for (long i = i_lo; i < i_hi; ++i) {
        SKEL_LOAD_PLANE(i + SKEL_R0);
        barrier(CLK_LOCAL_MEM_FENCE);
        const bool inside = inside_jk && i >= SKEL_R0 && i < d0 - SKEL_R0;
        if (mine && (edge != 3 || inside)) {
            const int first = (int)skel_wrap3(i - SKEL_R0, SKEL_PD);
            __local const SKEL_T* w =
                ring + (first + SKEL_R0) * SKEL_S0 + (ly + SKEL_R1) * SKEL_PW + lx + SKEL_R2;
            out[(i * d1 + j) * d2 + k] = SKEL_CALL(w);
        }
        // The next step overwrites the slots of plane i - R0.
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#undef SKEL_LOAD_PLANE
}
