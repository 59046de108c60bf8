// 2D stencil on a rows x cols matrix, tiled: each SKEL_TW x SKEL_TH work-group loads its
// outputs' neighbourhood ((SKEL_TH + 2rr) x (SKEL_TW + 2rc), edge mode applied) into
// local memory, then calls f with a pointer at its centre and the tile's row stride.
// Edge: 0 Duplicate, 1 Cyclic, 2 Pad, 3 None (only the interior is computed).
// Instantiated with: SKEL_T, SKEL_OUT_T, SKEL_TW, SKEL_TH, SKEL_UPARAMS, SKEL_CALL(w, s).
__kernel __attribute__((reqd_work_group_size(SKEL_TW, SKEL_TH, 1)))
void skel_map_overlap_2d(__global const SKEL_T* in, ulong in_off, __global SKEL_OUT_T* out,
                         ulong out_off, long rows, long cols, long rr, long rc, int edge,
                         SKEL_T pad, __local SKEL_T* tile SKEL_UPARAMS)
{
    long lx = (long)get_local_id(0), ly = (long)get_local_id(1);
    long j0 = (long)get_group_id(0) * SKEL_TW, i0 = (long)get_group_id(1) * SKEL_TH;
    long tw = SKEL_TW + 2 * rc, th = SKEL_TH + 2 * rr;
    __global const SKEL_T* src = in + in_off;
    for (long k = ly * SKEL_TW + lx; k < tw * th; k += SKEL_TW * SKEL_TH) {
        long i = i0 - rr + k / tw, j = j0 - rc + k % tw;
        SKEL_T v = pad;
        if (i >= 0 && i < rows && j >= 0 && j < cols) {
            v = src[i * cols + j];
        } else if (edge == 0) {
            long ci = i < 0 ? 0 : (i >= rows ? rows - 1 : i);
            long cj = j < 0 ? 0 : (j >= cols ? cols - 1 : j);
            v = src[ci * cols + cj];
        } else if (edge == 1) {
            v = src[(((i % rows) + rows) % rows) * cols + ((j % cols) + cols) % cols];
        }
        tile[k] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    long i = i0 + ly, j = j0 + lx;
    bool inside = i >= rr && i + rr < rows && j >= rc && j + rc < cols;
    if (i < rows && j < cols && (edge != 3 || inside)) {
        out[out_off + i * cols + j] = SKEL_CALL(tile + (ly + rr) * tw + lx + rc, tw);
    }
}
