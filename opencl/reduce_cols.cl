// Column reduction of a rows x cols row-major matrix, in blocks of rows:
// work-item (c, b) folds rows [b*per, min(rows, (b+1)*per)) of column c, top to bottom,
// into out[out_off + b*cols + c]. Run twice: blocks -> per-block partials -> one row.
// Consecutive work-items read consecutive columns of a row (coalesced); rows are loaded
// SKEL_CUNROLL at a time before they are folded, so that many loads are in flight.
// Instantiated with: SKEL_T, SKEL_F(a, b).
#define SKEL_CUNROLL 8
__kernel void skel_reduce_cols(__global const SKEL_T* in, ulong in_off, ulong rows, ulong cols,
                               ulong per, __global SKEL_T* out, ulong out_off SKEL_FP)
{
    ulong c = get_global_id(0);
    ulong b = get_global_id(1);
    ulong r0 = b * per;
    if (c >= cols || r0 >= rows) return;
    ulong r1 = r0 + per < rows ? r0 + per : rows;
    __global const SKEL_T* p = in + in_off + c;
    SKEL_T acc = p[r0 * cols];
    ulong r = r0 + 1;
    for (; r + SKEL_CUNROLL <= r1; r += SKEL_CUNROLL) {
        SKEL_T x[SKEL_CUNROLL];
        for (uint k = 0; k < SKEL_CUNROLL; ++k) {
            x[k] = p[(r + k) * cols];
        }
        for (uint k = 0; k < SKEL_CUNROLL; ++k) {
            acc = SKEL_F(acc, x[k]);
        }
    }
    for (; r < r1; ++r) {
        acc = SKEL_F(acc, p[r * cols]);
    }
    out[out_off + b * cols + c] = acc;
}
