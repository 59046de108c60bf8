// MapArray: out[i] = f(index(i), array, in0[i], .., uniforms), one work-item per element.
// The whole array is passed as a __global pointer (SKEL_ARRAY_SPACE).
// Instantiated with: SKEL_OUT_T, SKEL_PARAMS (array, inputs, uniforms), SKEL_CALL(i).
__kernel void skel_map_array(__global SKEL_OUT_T* out, ulong out_off, ulong n, ulong cols, ulong skel_base SKEL_PARAMS)
{
    ulong i = get_global_id(0);
    if (i < n) {
        out[out_off + i] = SKEL_CALL(i);
    }
}
