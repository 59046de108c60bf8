// skel: helpers shared by the CUDA kernel templates (included after the generated user
// functions and the template's #defines). SKEL_OP(a, b), where defined, is the user's
// binary function. No identity element exists: every fold tracks whether it holds a value
// ("has" flags), and the user function is only ever applied to two real values.

typedef unsigned long long skel_u64;

// The checked variant's fault record (src/backends/cuda/fault.rs): SKEL_FP declares it
// after a parameter list, SKEL_FA passes it on; both empty when unchecked.
#ifndef SKEL_FP
#define SKEL_FP
#define SKEL_FA
#endif
typedef long long skel_i64;

#define SKEL_FULL_MASK 0xffffffffu
#define SKEL_WORDS(T) ((sizeof(T) + 3) / 4)

// A zeroed value of any plain type (placeholder of a fold that holds no value yet).
template <typename T>
__device__ __forceinline__ T skel_zero() {
    T t = {};
    return t;
}

// Shuffles of any plain type, word by word.
template <typename T>
__device__ __forceinline__ T skel_shfl_down(T v, unsigned d) {
    union { T t; unsigned w[SKEL_WORDS(T)]; } u;
    u.t = v;
#pragma unroll
    for (int k = 0; k < (int)SKEL_WORDS(T); ++k) u.w[k] = __shfl_down_sync(SKEL_FULL_MASK, u.w[k], d);
    return u.t;
}

template <typename T>
__device__ __forceinline__ T skel_shfl_up(T v, unsigned d) {
    union { T t; unsigned w[SKEL_WORDS(T)]; } u;
    u.t = v;
#pragma unroll
    for (int k = 0; k < (int)SKEL_WORDS(T); ++k) u.w[k] = __shfl_up_sync(SKEL_FULL_MASK, u.w[k], d);
    return u.t;
}

// V consecutive values at p (16-byte aligned when V * sizeof(T) is a multiple of 16): one
// or more 16-byte accesses if the size allows, else element by element.
template <typename T, int V>
__device__ __forceinline__ void skel_loadv(const T* __restrict__ p, T (&x)[V]) {
    if constexpr ((sizeof(T) * V) % 16 == 0) {
        union { uint4 q[sizeof(T) * V / 16]; T t[V]; } u;
#pragma unroll
        for (int k = 0; k < (int)(sizeof(T) * V / 16); ++k) u.q[k] = reinterpret_cast<const uint4*>(p)[k];
#pragma unroll
        for (int v = 0; v < V; ++v) x[v] = u.t[v];
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v) x[v] = p[v];
    }
}

template <typename T, int V>
__device__ __forceinline__ void skel_storev(T* __restrict__ p, const T (&x)[V]) {
    if constexpr ((sizeof(T) * V) % 16 == 0) {
        union { uint4 q[sizeof(T) * V / 16]; T t[V]; } u;
#pragma unroll
        for (int v = 0; v < V; ++v) u.t[v] = x[v];
#pragma unroll
        for (int k = 0; k < (int)(sizeof(T) * V / 16); ++k) reinterpret_cast<uint4*>(p)[k] = u.q[k];
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v) p[v] = x[v];
    }
}

// Values in word slots, read and written around L1 (for data exchanged between blocks).
template <typename T>
__device__ __forceinline__ void skel_put_cg(unsigned* slot, T v) {
    union { T t; unsigned w[SKEL_WORDS(T)]; } u;
    u.t = v;
#pragma unroll
    for (int k = 0; k < (int)SKEL_WORDS(T); ++k) __stcg(slot + k, u.w[k]);
}

template <typename T>
__device__ __forceinline__ T skel_get_cg(const unsigned* slot) {
    union { T t; unsigned w[SKEL_WORDS(T)]; } u;
#pragma unroll
    for (int k = 0; k < (int)SKEL_WORDS(T); ++k) u.w[k] = __ldcg(slot + k);
    return u.t;
}

#ifdef SKEL_OP
// acc := acc (+) v, where acc may not hold a value yet.
template <typename T>
__device__ __forceinline__ void skel_fold(T& acc, bool& has, T v SKEL_FP) {
    acc = has ? SKEL_OP(acc, v) : v;
    has = true;
}

// Ordered fold over the warp of the values present (any pattern of `has`); the result is
// in lane 0 (its `has` returned there). Lane i combines with lane i + off only, so the
// order of operands is the lanes' order: associativity suffices, no commutativity needed.
template <typename T>
__device__ __forceinline__ bool skel_warp_reduce(T& v, bool has SKEL_FP) {
    const unsigned lane = threadIdx.x & 31;
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
        T o = skel_shfl_down(v, off);
        bool oh = __shfl_down_sync(SKEL_FULL_MASK, (int)has, off) != 0;
        if ((lane & (2 * off - 1)) == 0 && oh) {
            v = has ? SKEL_OP(v, o) : o;
            has = true;
        }
    }
    return has;
}

// The same for a warp whose lanes all hold a value.
template <typename T>
__device__ __forceinline__ void skel_warp_reduce_full(T& v SKEL_FP) {
    const unsigned lane = threadIdx.x & 31;
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
        T o = skel_shfl_down(v, off);
        if ((lane & (2 * off - 1)) == 0) v = SKEL_OP(v, o);
    }
}

// Ordered inclusive scan over the warp (Kogge-Stone) of the values present.
template <typename T>
__device__ __forceinline__ bool skel_warp_scan(T& v, bool has SKEL_FP) {
    const unsigned lane = threadIdx.x & 31;
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
        T o = skel_shfl_up(v, off);
        bool oh = __shfl_up_sync(SKEL_FULL_MASK, (int)has, off) != 0;
        if (lane >= off && oh) {
            v = has ? SKEL_OP(o, v) : o;
            has = true;
        }
    }
    return has;
}
#endif
