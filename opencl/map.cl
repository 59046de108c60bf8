// Map: out[i] = f(index(i), in0[i], .., uniforms), one work-item per element.
// Instantiated with: SKEL_OUT_T, SKEL_PARAMS (inputs, uniforms), SKEL_CALL(i).
__kernel void skel_map(__global SKEL_OUT_T* out, ulong out_off, ulong n, ulong cols SKEL_PARAMS)
{
    ulong i = get_global_id(0);
    if (i < n) {
        out[out_off + i] = SKEL_CALL(i);
    }
}
