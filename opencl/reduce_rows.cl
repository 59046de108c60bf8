// Rows of at most SKEL_RK values (narrow matrices): work-group g folds the band of rows
// [g*SKEL_RWG, (g+1)*SKEL_RWG), which is contiguous in the row-major matrix: the band is
// loaded striped (coalesced) into local memory, then work-item l folds row l of the band,
// left to right, into out[out_off + row]. Wider rows take skel_reduce, one work-group each.
// Instantiated with: SKEL_T, SKEL_F(a, b), SKEL_RWG, SKEL_RK, and reduce.cl (SKEL_PAD).
__kernel __attribute__((reqd_work_group_size(SKEL_RWG, 1, 1)))
void skel_reduce_rows_narrow(ulong rows, ulong cols, __global SKEL_T* out, ulong out_off,
                             __global const SKEL_T* in, ulong in_off SKEL_FP)
{
    __local SKEL_T tile[SKEL_PAD(SKEL_TILE)];
    const uint l = (uint)get_local_id(0);
    const ulong r0 = (ulong)get_group_id(0) * SKEL_RWG;
    const uint nr = rows - r0 < (ulong)SKEL_RWG ? (uint)(rows - r0) : (uint)SKEL_RWG;
    const uint w = (uint)cols;
    const uint m = nr * w;
    __global const SKEL_T* band = in + in_off + r0 * cols;
    for (uint j = l; j < m; j += SKEL_RWG) {
        tile[SKEL_PAD(j)] = band[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < nr) {
        const uint a = l * w;
        SKEL_T acc = tile[SKEL_PAD(a)];
        for (uint q = 1; q < w; ++q) {
            acc = SKEL_F(acc, tile[SKEL_PAD(a + q)]);
        }
        out[out_off + r0 + l] = acc;
    }
}
