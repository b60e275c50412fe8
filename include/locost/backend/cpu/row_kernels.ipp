// The row kernels of the softmax (the attention's rows: attention_rows.hpp) and of the norms
// (elementwise.hpp) for float, written once against simd_levels.hpp's names (fvec, flanes, fma_v,
// hadd_v, max_v, exp_v) and compiled at each level by at_levels.ipp (no include guard, on
// purpose). Tails use the same formulas in scalar code; each loop runs to nv = n rounded down to
// whole vectors, then from nv (a bound GCC can follow: `j + flanes <= n` made it warn of an
// overflowing tail loop in a caller with a constant n).

// The largest of n entries (−∞ for none).
inline float max_row(const float* row, index_t n) {
    const index_t nv = n / flanes * flanes;
    float m = -std::numeric_limits<float>::infinity();
    if (nv > 0) {
        fvec vm = fvec::load_unaligned(row);
        for (index_t j = flanes; j < nv; j += flanes) vm = max_v(vm, fvec::load_unaligned(row + j));
        alignas(64) float lanes[flanes];
        vm.store_unaligned(lanes);
        for (const float v : lanes) m = std::max(m, v);
    }
    for (index_t j = nv; j < n; ++j) m = std::max(m, row[j]);
    return m;
}

// row = e^(row − m) over n entries; returns their sum.
inline float exp_row(float* row, float m, index_t n) {
    const index_t nv = n / flanes * flanes;
    fvec sum_v(0.0f);
    const fvec vm(m);
    for (index_t j = 0; j < nv; j += flanes) {
        const fvec e = exp_v(fvec::load_unaligned(row + j) - vm);
        e.store_unaligned(row + j);
        sum_v = sum_v + e;
    }
    float sum = hadd_v(sum_v);
    for (index_t j = nv; j < n; ++j) sum += (row[j] = std::exp(row[j] - m));
    return sum;
}

// row[0, n) += b[0, n).
inline void add_row(float* row, const float* b, index_t n) {
    const index_t nv = n / flanes * flanes;
    for (index_t j = 0; j < nv; j += flanes) (fvec::load_unaligned(row + j) + fvec::load_unaligned(b + j)).store_unaligned(row + j);
    for (index_t j = nv; j < n; ++j) row[j] += b[j];
}

// y = x ⊙ w / √(mean(x²) + eps) over a row of n.
inline void rms_norm_row(const float* x, const float* w, float eps, float* y, index_t n) {
    const index_t nv = n / flanes * flanes;
    fvec acc(0.0f);
    for (index_t i = 0; i < nv; i += flanes) {
        const fvec v = fvec::load_unaligned(x + i);
        acc = fma_v(v, v, acc);
    }
    float ss = hadd_v(acc);
    for (index_t i = nv; i < n; ++i) ss += x[i] * x[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    for (index_t i = 0; i < nv; i += flanes) (fvec::load_unaligned(x + i) * fvec(inv) * fvec::load_unaligned(w + i)).store_unaligned(y + i);
    for (index_t i = nv; i < n; ++i) y[i] = x[i] * inv * w[i];
}

// y = (x − mean) / √(var + eps) ⊙ w + b over a row of n, the variance from the centred values
// (a second pass, as PyTorch's LayerNorm: E[x²] − E[x]² cancels badly when |mean| ≫ std). The
// mean is m + δ, kept as two floats: m = Σx/n in float, δ = Σ(x − m)/n from the second pass (which
// corrects the float sum's error), and y takes (x − m) − δ. A float mean near 40 is itself up to
// 2e-6 off; that alone put layer norms of such rows outside 2e-6 of double (under qemu-aarch64).
inline void layer_norm_row(const float* x, const float* w, const float* b, float eps, float* y, index_t n) {
    const index_t nv = n / flanes * flanes;
    fvec acc(0.0f);
    for (index_t i = 0; i < nv; i += flanes) acc = acc + fvec::load_unaligned(x + i);
    float sum = hadd_v(acc);
    for (index_t i = nv; i < n; ++i) sum += x[i];
    const float m = sum / static_cast<float>(n);
    fvec c_sum(0.0f), c_sq(0.0f);
    for (index_t i = 0; i < nv; i += flanes) {
        const fvec c = fvec::load_unaligned(x + i) - fvec(m);
        c_sum = c_sum + c;
        c_sq = fma_v(c, c, c_sq);
    }
    float sc = hadd_v(c_sum), ss = hadd_v(c_sq);
    for (index_t i = nv; i < n; ++i) sc += x[i] - m, ss += (x[i] - m) * (x[i] - m);
    const float delta = sc / static_cast<float>(n);
    const float var = std::max(0.0f, ss / static_cast<float>(n) - delta * delta);
    const float inv = 1.0f / std::sqrt(var + eps);
    for (index_t i = 0; i < nv; i += flanes)
        fma_v((fvec::load_unaligned(x + i) - fvec(m) - fvec(delta)) * fvec(inv), fvec::load_unaligned(w + i), fvec::load_unaligned(b + i))
            .store_unaligned(y + i);
    for (index_t i = nv; i < n; ++i) y[i] = ((x[i] - m) - delta) * inv * w[i] + b[i];
}
