// Map: out[i] = f(index(skel_base + i), in0[i], .., uniforms), one work-item per element
// (skel_base: the first flat index of a call that is part of a larger one, else 0).
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
__kernel void skel_map(__global SKEL_OUT_T* out, ulong out_off, ulong n, ulong cols, ulong skel_base SKEL_PARAMS)
{
    ulong col = get_global_id(0);
    ulong i = get_global_id(1) * cols + col;
    // The part of a larger call starts at a whole row (skel_base, its first flat index).
    ulong row = skel_base / cols + get_global_id(1);
    if (col < cols && i < n) {
        SKEL_STORE(i, SKEL_CALL2(i, row, col));
    }
}
#else
__kernel void skel_map(__global SKEL_OUT_T* out, ulong out_off, ulong n, ulong cols, ulong skel_base SKEL_PARAMS)
{
    ulong i = get_global_id(0);
    if (i < n) {
        SKEL_STORE(i, SKEL_CALL(i));
    }
}
#endif
