// 1D stencil over `lines` lines of `len` elements (a vector: one line; rowwise: rows;
// colwise: columns, elements `stride` apart). Tiled: each work-group loads its
// SKEL_WG outputs' neighbourhood (SKEL_WG + 2r elements, edge mode applied) into local
// memory once, then each work-item calls f with a pointer at its centre in the tile.
// Edge: 0 Duplicate, 1 Cyclic, 2 Pad, 3 None (border outputs are not written).
// Instantiated with: SKEL_T (element), SKEL_OUT_T, SKEL_WG, SKEL_UPARAMS, SKEL_CALL(w).
__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_map_overlap(__global const SKEL_T* in, ulong in_off, __global SKEL_OUT_T* out,
                      ulong out_off, long len, long stride, long line_stride, long r,
                      int edge, SKEL_T pad, __local SKEL_T* tile SKEL_UPARAMS)
{
    long line = (long)get_global_id(1);
    long l = (long)get_local_id(0);
    long base = (long)get_group_id(0) * SKEL_WG;
    __global const SKEL_T* src = in + in_off + line * line_stride;
    for (long k = l; k < SKEL_WG + 2 * r; k += SKEL_WG) {
        long p = base - r + k;
        SKEL_T v = pad;
        if (p >= 0 && p < len) {
            v = src[p * stride];
        } else if (edge == 0) {
            v = src[(p < 0 ? 0 : len - 1) * stride];
        } else if (edge == 1) {
            v = src[(((p % len) + len) % len) * stride];
        }
        tile[k] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    long i = base + l;
    if (i < len && (edge != 3 || (i >= r && i + r < len))) {
        out[out_off + line * line_stride + i * stride] = SKEL_CALL(tile + l + r);
    }
}
