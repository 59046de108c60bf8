// Scan across work-groups by reduce-then-scan (f associative, maybe not commutative): the
// input is read twice and the output written once, with no host round trip between:
//  1. skel_reduce (reduce.cl) folds each work-group's chunk into totals[g];
//  2. skel_scan_chunks over `totals` in one work-group, exclusive (seeded with `start` for
//     exclusive scans): carries[g] = the fold of everything before chunk g;
//  3. skel_scan_chunks over the input, work-group g over chunk g (the same chunks as in 1),
//     starting from carries[g].
// skel_scan_chunks, per tile of SKEL_TILE positions (the layout of reduce.cl): striped loads
// into local memory; work-item l folds its SKEL_RK consecutive values (kept in registers);
// SKEL_NRUNS work-items scan SKEL_RUN consecutive work-item totals each, in place; work-item
// 0 turns the run totals into run prefixes, starting from the running carry; every work-item
// then folds its values onto its own prefix into local memory; striped stores.
// Work-items without values never call f; a prefix that does not exist (the first position
// of an unseeded exclusive scan, whose output slot then keeps its input value: step 2 of an
// inclusive scan, where carries[0] is never read) is never combined.
// Instantiated with: SKEL_T, SKEL_F(a, b), SKEL_RWG, SKEL_RK, SKEL_RUN, and reduce.cl (whose
// SKEL_VLOAD and SKEL_VEC_OK, if defined, serve here too, with SKEL_VSTORE(p, src): 4 values
// to out from position p, one 16-byte store).
__kernel __attribute__((reqd_work_group_size(SKEL_RWG, 1, 1)))
void skel_scan_chunks(__global const SKEL_T* in, ulong in_off, ulong n, ulong chunk,
                      __global SKEL_T* out, ulong out_off, __global const SKEL_T* carries,
                      int use_carries, int seeded, SKEL_T seed, int exclusive SKEL_FP)
{
    __local SKEL_T tile[SKEL_PAD(SKEL_TILE)];
    __local SKEL_T part[SKEL_PADR(SKEL_RWG)];
    __local SKEL_T runs[SKEL_NRUNS];
    const ulong g = get_group_id(0);
    const uint l = (uint)get_local_id(0);
    const ulong lo = g * chunk;
    const ulong hi = lo + chunk < n ? lo + chunk : n;
    const uint a = l * SKEL_RK;
    // Whether the tile being scanned has something before it (the same for all work-items).
    bool has_carry = (g > 0 && use_carries) || seeded;
    SKEL_T carry;
    if (l == 0 && has_carry) {
        carry = g > 0 && use_carries ? carries[g] : seed;
    }
    for (ulong t = lo; t < hi; t += SKEL_TILE) {
        const uint m = hi - t < (ulong)SKEL_TILE ? (uint)(hi - t) : (uint)SKEL_TILE;
#ifdef SKEL_VLOAD
        if (m == SKEL_TILE && SKEL_VEC_OK(lo)) {
            SKEL_T x[SKEL_RK];
            for (uint k = 0; k < SKEL_RK / 4; ++k) {
                SKEL_VLOAD(t + 4 * (k * SKEL_RWG + l), x + 4 * k);
            }
            skel_tile_put4(tile, x, l);
        } else
#endif
        if (m == SKEL_TILE) {
            SKEL_T x[SKEL_RK];
            for (uint k = 0; k < SKEL_RK; ++k) {
                x[k] = in[in_off + t + k * SKEL_RWG + l];
            }
            skel_tile_put(tile, x, l);
        } else {
            for (uint j = l; j < m; j += SKEL_RWG) {
                tile[SKEL_PAD(j)] = in[in_off + t + j];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const uint valid = (m + SKEL_RK - 1) / SKEL_RK;
        // Work-item 0 updates has_carry below; the prefixes need its value at the tile start.
        const bool had = has_carry;
        SKEL_T y[SKEL_RK];
        if (a < m) {
            part[SKEL_PADR(l)] = skel_tile_fold(tile, a, m, y SKEL_FA);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const uint r0 = l * SKEL_RUN;
        if (r0 < valid) {
            const uint r1 = r0 + SKEL_RUN < valid ? r0 + SKEL_RUN : valid;
            SKEL_T acc = part[SKEL_PADR(r0)];
            for (uint q = r0 + 1; q < r1; ++q) {
                acc = SKEL_F(acc, part[SKEL_PADR(q)]);
                part[SKEL_PADR(q)] = acc;
            }
            runs[l] = acc;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (l == 0) {
            // runs[r] becomes the prefix of run r (undefined for r = 0 without a carry).
            const uint nr = (valid + SKEL_RUN - 1) / SKEL_RUN;
            for (uint r = 0; r < nr; ++r) {
                const SKEL_T total = runs[r];
                if (has_carry) runs[r] = carry;
                carry = has_carry ? SKEL_F(carry, total) : total;
                has_carry = true;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (a < m) {
            const uint r = l / SKEL_RUN;
            bool has = had || r > 0;
            SKEL_T p;
            if (has) p = runs[r];
            if (l % SKEL_RUN != 0) {
                const SKEL_T before = part[SKEL_PADR(l - 1)];
                p = has ? SKEL_F(p, before) : before;
                has = true;
            }
            for (uint k = 0; k < SKEL_RK; ++k) {
                if (a + k < m) {
                    if (exclusive && has) tile[SKEL_PAD(a + k)] = p;
                    p = has ? SKEL_F(p, y[k]) : y[k];
                    has = true;
                    if (!exclusive) tile[SKEL_PAD(a + k)] = p;
                }
            }
        }
        // Uniform again: after a tile (never empty) there is always a carry.
        has_carry = true;
        barrier(CLK_LOCAL_MEM_FENCE);
#ifdef SKEL_VSTORE
        if (m == SKEL_TILE && (out_off + lo) % 4 == 0) {
            for (uint k = 0; k < SKEL_RK / 4; ++k) {
                SKEL_T x[4];
                for (uint i = 0; i < 4; ++i) {
                    x[i] = tile[SKEL_PAD(4 * (k * SKEL_RWG + l) + i)];
                }
                SKEL_VSTORE(t + 4 * (k * SKEL_RWG + l), x);
            }
        } else
#endif
        if (m == SKEL_TILE) {
            for (uint k = 0; k < SKEL_RK; ++k) {
                out[out_off + t + k * SKEL_RWG + l] = tile[SKEL_PAD(k * SKEL_RWG + l)];
            }
        } else {
            for (uint j = l; j < m; j += SKEL_RWG) {
                out[out_off + t + j] = tile[SKEL_PAD(j)];
            }
        }
        // The next tile's loads overwrite `tile`: wait until every work-item stored its part.
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}
