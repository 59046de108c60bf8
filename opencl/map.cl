// Map: out[i] = f(index(i), in0[i], .., uniforms), one work-item per element.
// Instantiated with: SKEL_OUT_T, SKEL_PARAMS (inputs, uniforms), SKEL_CALL(i); for a
// compute-bound 2D index map (src/codegen/cost.rs) also SKEL_GRID2D and
// SKEL_CALL2(i, row, col), the call with the row and column given. SKEL_STORE(i, r) stores
// result r at position i: `out[out_off + i] = r` unless defined before (a multi-output Map
// stores each member of a tuple result to its own buffer, SKEL_PARAMS then starts with
// them).
#ifndef SKEL_STORE
#define SKEL_STORE(i, r) out[out_off + (i)] = (r)
#endif
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
        SKEL_STORE(i, SKEL_CALL2(i, row, col));
    }
}
#else
__kernel void skel_map(__global SKEL_OUT_T* out, ulong out_off, ulong n, ulong cols SKEL_PARAMS)
{
    ulong i = get_global_id(0);
    if (i < n) {
        SKEL_STORE(i, SKEL_CALL(i));
    }
}
#endif
