// One pass of an order-preserving tree reduction (f associative, maybe not commutative).
// Work-group g folds positions [g*chunk, min(n, (g+1)*chunk)) into partials[part_off + g],
// in tiles of SKEL_WG*SKEL_RK consecutive positions, left to right:
//  - the tile is loaded into local memory, coalesced (work-item l loads l, l+SKEL_WG, ..);
//  - work-item l folds the SKEL_RK consecutive elements l*SKEL_RK.. of the tile, in order,
//    into the first of them;
//  - those run results are combined pairwise in local memory, left to right;
//  - work-item 0 folds the tile's result onto the results of the tiles before it.
// Only work-items that hold a value take part (they are always a prefix), so f never sees
// padding.
// Instantiated with: SKEL_KNAME, SKEL_T, SKEL_F(a, b), SKEL_LOAD(p), SKEL_LOAD_PARAMS,
// SKEL_WG, SKEL_RK.
__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void SKEL_KNAME(ulong n, ulong chunk, __global SKEL_T* partials, ulong part_off SKEL_LOAD_PARAMS)
{
    __local SKEL_T tile[SKEL_WG * SKEL_RK];
    ulong g = get_group_id(0);
    uint l = (uint)get_local_id(0);
    ulong lo = g * chunk;
    ulong hi = lo + chunk < n ? lo + chunk : n;
    SKEL_T carry;
    // lo, hi and so every loop bound below are the same for the whole work-group: the
    // barriers are reached by all of its work-items.
    for (ulong t = lo; t < hi; t += (ulong)(SKEL_WG * SKEL_RK)) {
        uint m = hi - t < (ulong)(SKEL_WG * SKEL_RK) ? (uint)(hi - t) : (uint)(SKEL_WG * SKEL_RK);
        for (uint j = l; j < m; j += SKEL_WG) {
            tile[j] = SKEL_LOAD(t + j);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        uint valid = (m + SKEL_RK - 1) / SKEL_RK;
        if (l < valid) {
            uint a = l * SKEL_RK;
            uint b = a + SKEL_RK < m ? a + SKEL_RK : m;
            SKEL_T acc = tile[a];
            for (uint q = a + 1; q < b; ++q) {
                acc = SKEL_F(acc, tile[q]);
            }
            // Only this work-item reads tile[a..b): no barrier needed before the write.
            tile[a] = acc;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint s = 1; s < valid; s <<= 1) {
            if ((l & (2 * s - 1)) == 0 && l + s < valid) {
                tile[l * SKEL_RK] = SKEL_F(tile[l * SKEL_RK], tile[(l + s) * SKEL_RK]);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (l == 0) {
            carry = t == lo ? tile[0] : SKEL_F(carry, tile[0]);
        }
        // The next tile's loads overwrite tile[0]: wait until work-item 0 has read it.
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0 && hi > lo) {
        partials[part_off + g] = carry;
    }
}
