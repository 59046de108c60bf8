// Map: out[i] = f(index(i), in0[i], .., uniforms), one work-item per element.
// Instantiated with: SKEL_OUT_T, SKEL_PARAMS (inputs, uniforms), SKEL_CALL(i); for a
// compute-bound 2D index map (src/codegen/cost.rs) also SKEL_GRID2D and
// SKEL_CALL2(i, row, col), the call with the row and column given.
#ifdef SKEL_GRID2D
// A 2D range: row and column are the work-item's coordinates (no 64-bit division), and a
// 16-wide work-group puts compact patches in a sub-group, so a loop that runs longer for
// some elements (Mandelbrot's) holds up fewer others than along a row.
__kernel void skel_map(__global SKEL_OUT_T* out, ulong out_off, ulong n, ulong cols SKEL_PARAMS)
{
    ulong col = get_global_id(0);
    ulong row = get_global_id(1);
    ulong i = row * cols + col;
    if (col < cols && i < n) {
        out[out_off + i] = SKEL_CALL2(i, row, col);
    }
}
#else
__kernel void skel_map(__global SKEL_OUT_T* out, ulong out_off, ulong n, ulong cols SKEL_PARAMS)
{
    ulong i = get_global_id(0);
    if (i < n) {
        out[out_off + i] = SKEL_CALL(i);
    }
}
#endif
