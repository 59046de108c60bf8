// Column reduction of a rows x cols row-major matrix, in blocks of rows:
// work-item (c, b) folds rows [b*per, min(rows, (b+1)*per)) of column c, top to bottom,
// into out[out_off + b*cols + c]. Run twice: blocks -> per-block partials -> one row.
// Instantiated with: SKEL_T, SKEL_F(a, b).
__kernel void skel_reduce_cols(__global const SKEL_T* in, ulong in_off, ulong rows, ulong cols,
                               ulong per, __global SKEL_T* out, ulong out_off)
{
    ulong c = get_global_id(0);
    ulong b = get_global_id(1);
    ulong r0 = b * per;
    if (c >= cols || r0 >= rows) return;
    ulong r1 = r0 + per < rows ? r0 + per : rows;
    SKEL_T acc = in[in_off + r0 * cols + c];
    for (ulong r = r0 + 1; r < r1; ++r) {
        acc = SKEL_F(acc, in[in_off + r * cols + c]);
    }
    out[out_off + b * cols + c] = acc;
}
