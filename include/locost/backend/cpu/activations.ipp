// The gated and plain activations of elementwise.hpp for float, written once against
// simd_levels.hpp's names (fvec, flanes, exp_v, max_v) and compiled at each level by
// at_levels.ipp (no include guard, on purpose). gelu-tanh is computed as x·σ(2u), the same
// function as 0.5·x·(1 + tanh(u)) (1 + tanh(u) = 2σ(2u)), so an exp is all it needs; gelu-erf
// stays with xsimd's erf at the build's width. Tails use the scalar formulas (apply_act).

template <activation Act>
inline fvec act_v(fvec x) {
    if constexpr (Act == activation::relu) {
        return max_v(x, fvec(0.0f));
    } else if constexpr (Act == activation::gelu_tanh) {
        // u = √(2/π)·(x + 0.044715·x³); x·σ(2u) = x / (1 + e^(−2u))
        const fvec minus_2u = fvec(-2.0f * 0.7978845608028654f) * (x + fvec(0.044715f) * x * x * x);
        return x / (fvec(1.0f) + exp_v(minus_2u));
    } else {
        static_assert(Act == activation::silu, "act_v: gelu-erf runs at the build's width (xsimd's erf)");
        return x / (fvec(1.0f) + exp_v(fvec(0.0f) - x));  // x·σ(x)
    }
}

// x[b, e) = act(x[b, e)).
template <activation Act>
void activate_span(float* x, index_t b, index_t e) {
    index_t i = b;
    for (; i + flanes <= e; i += flanes) act_v<Act>(fvec::load_unaligned(x + i)).store_unaligned(x + i);
    for (; i < e; ++i) x[i] = apply_act<Act>(x[i]);
}

// Rows [rb, re) of a (n wide, stride ld) = act(a) ⊙ b.
template <activation Act>
void gate_rows(float* a, const float* bsrc, index_t rb, index_t re, index_t n, index_t ld) {
    for (index_t r = rb; r < re; ++r) {
        float* ar = a + r * ld;
        const float* br = bsrc + r * ld;
        index_t i = 0;
        for (; i + flanes <= n; i += flanes)
            (act_v<Act>(fvec::load_unaligned(ar + i)) * fvec::load_unaligned(br + i)).store_unaligned(ar + i);
        for (; i < n; ++i) ar[i] = apply_act<Act>(ar[i]) * br[i];
    }
}
