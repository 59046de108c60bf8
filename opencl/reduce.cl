// Order-preserving reduction (f associative, maybe not commutative), one partial per
// work-group. Work-group g folds positions [g*chunk, min(n, (g+1)*chunk)) into
// partials[part_off + g], tile by tile (SKEL_TILE consecutive positions), left to right:
//  - striped loads: work-item l loads tile positions l, l+SKEL_RWG, .. (each load
//    instruction of a warp reads one contiguous segment; SKEL_RK loads in flight per
//    work-item), stored into local memory;
//  - blocked folds: work-item l folds the SKEL_RK consecutive values l*SKEL_RK.. in order;
//  - SKEL_RWG/SKEL_RUN work-items each fold SKEL_RUN consecutive work-item results, then
//    work-item 0 folds those run results onto the group's carry.
// Three barriers per tile of SKEL_RWG*SKEL_RK values, no tree of log2(SKEL_RWG) levels.
// Only loaded positions are combined (work-items holding values are always a prefix), so f
// never sees padding and needs no identity.
// Instantiated with: SKEL_KNAME, SKEL_T, SKEL_F(a, b), SKEL_LOAD(p), SKEL_LOAD_PARAMS,
// SKEL_RWG (work-group size), SKEL_RK (values per work-item and tile), SKEL_RUN; optionally
// SKEL_VLOAD(p, dst) (4 values from position p, a multiple of 4, into dst[0..4), one 16-byte
// load) and SKEL_VEC_OK(lo) (whether the positions from lo on are 16-byte aligned).
// SKEL_FP / SKEL_FA: the checked variant's fault record as a last parameter / argument of
// every function that calls SKEL_F or SKEL_LOAD (empty when unchecked).
#ifndef SKEL_REDUCE_COMMON
#define SKEL_REDUCE_COMMON
#define SKEL_TILE (SKEL_RWG * SKEL_RK)
// Local-memory index with one slot of padding per 32: the blocked reads (work-item l,
// value k at l*SKEL_RK + k) would otherwise hit the same banks.
#define SKEL_PAD(j) ((j) + ((j) >> 5))
// Work-item results are read SKEL_RUN apart by the run folds: pad once per run.
#define SKEL_PADR(j) ((j) + (j) / SKEL_RUN)
#define SKEL_NRUNS (SKEL_RWG / SKEL_RUN)

// x[k] (loaded from tile position k*SKEL_RWG + l) into the tile.
void skel_tile_put(__local SKEL_T* tile, const SKEL_T* x, uint l)
{
    for (uint k = 0; k < SKEL_RK; ++k) {
        tile[SKEL_PAD(k * SKEL_RWG + l)] = x[k];
    }
}

// x[4k + i] (loaded from tile position 4*(k*SKEL_RWG + l) + i) into the tile.
void skel_tile_put4(__local SKEL_T* tile, const SKEL_T* x, uint l)
{
    for (uint k = 0; k < SKEL_RK / 4; ++k) {
        for (uint i = 0; i < 4; ++i) {
            tile[SKEL_PAD(4 * (k * SKEL_RWG + l) + i)] = x[4 * k + i];
        }
    }
}

// The values of tile positions a.. (below m, at least one) into y, and their fold.
SKEL_T skel_tile_fold(__local const SKEL_T* tile, uint a, uint m, SKEL_T* y SKEL_FP)
{
    for (uint k = 0; k < SKEL_RK; ++k) {
        if (a + k < m) y[k] = tile[SKEL_PAD(a + k)];
    }
    SKEL_T acc = y[0];
    for (uint k = 1; k < SKEL_RK; ++k) {
        if (a + k < m) acc = SKEL_F(acc, y[k]);
    }
    return acc;
}
#endif

__kernel __attribute__((reqd_work_group_size(SKEL_RWG, 1, 1)))
void SKEL_KNAME(ulong n, ulong chunk, __global SKEL_T* partials, ulong part_off SKEL_LOAD_PARAMS SKEL_FP)
{
    __local SKEL_T tile[SKEL_PAD(SKEL_TILE)];
    __local SKEL_T part[SKEL_PADR(SKEL_RWG)];
    __local SKEL_T runs[SKEL_NRUNS];
    const uint l = (uint)get_local_id(0);
    const ulong lo = (ulong)get_group_id(0) * chunk;
    const ulong hi = lo + chunk < n ? lo + chunk : n;
    const uint a = l * SKEL_RK;
    SKEL_T carry;
    // lo, hi and so every loop bound below are the same for the whole work-group: the
    // barriers are reached by all of its work-items.
    for (ulong t = lo; t < hi; t += SKEL_TILE) {
        const uint m = hi - t < (ulong)SKEL_TILE ? (uint)(hi - t) : (uint)SKEL_TILE;
#ifdef SKEL_VLOAD
        if (m == SKEL_TILE && SKEL_VEC_OK(lo)) {
            // 16-byte loads of 4 consecutive values, striped by groups of 4.
            SKEL_T x[SKEL_RK];
            for (uint k = 0; k < SKEL_RK / 4; ++k) {
                SKEL_VLOAD(t + 4 * (k * SKEL_RWG + l), x + 4 * k);
            }
            skel_tile_put4(tile, x, l);
        } else
#endif
        if (m == SKEL_TILE) {
            // All loads first, then the stores: SKEL_RK loads in flight per work-item.
            SKEL_T x[SKEL_RK];
            for (uint k = 0; k < SKEL_RK; ++k) {
                x[k] = SKEL_LOAD(t + k * SKEL_RWG + l);
            }
            skel_tile_put(tile, x, l);
        } else {
            for (uint j = l; j < m; j += SKEL_RWG) {
                tile[SKEL_PAD(j)] = SKEL_LOAD(t + j);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const uint valid = (m + SKEL_RK - 1) / SKEL_RK;
        if (a < m) {
            SKEL_T y[SKEL_RK];
            part[SKEL_PADR(l)] = skel_tile_fold(tile, a, m, y SKEL_FA);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const uint r0 = l * SKEL_RUN;
        if (r0 < valid) {
            const uint r1 = r0 + SKEL_RUN < valid ? r0 + SKEL_RUN : valid;
            SKEL_T acc = part[SKEL_PADR(r0)];
            for (uint q = r0 + 1; q < r1; ++q) {
                acc = SKEL_F(acc, part[SKEL_PADR(q)]);
            }
            runs[l] = acc;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (l == 0) {
            const uint nr = (valid + SKEL_RUN - 1) / SKEL_RUN;
            SKEL_T acc = runs[0];
            for (uint q = 1; q < nr; ++q) {
                acc = SKEL_F(acc, runs[q]);
            }
            carry = t == lo ? acc : SKEL_F(carry, acc);
        }
        // No barrier here: the next tile's writes to `tile` follow reads that ended before
        // the second barrier above, its writes to `part` and `runs` come after its own
        // first and second barriers, which work-item 0 reaches only after reading `runs`.
    }
    if (l == 0 && hi > lo) {
        partials[part_off + get_group_id(0)] = carry;
    }
}
