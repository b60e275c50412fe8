// The bidirectional convolution of the LOCOST encoder (ops/bidirectional_conv.hpp,
// backend/cpu/bidirectional_conv.hpp, backend/cpu/fft.hpp) against its O(L^2) definition in
// double: the FFT and direct paths, overlap-save blocks for short kernels, and the original CUDA
// path's geometry.
#include "models/locost_encoder.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

namespace {
// y[j] = Σ_{l≤j} kf[j−l]·v[l] + Σ_{l≥j} kb[l−j]·v[l] + D·v[j] in double, for v (batch, L, H) and
// kernels (H, channels, L) that are zero from lag `sup` on (sup = L: all of them).
template <class S>
std::vector<double> conv_definition(const std::vector<S>& v, const std::vector<S>& kern, const std::vector<S>& D, index_t batch, index_t L,
                                    index_t H, index_t channels, index_t sup) {
    std::vector<double> want(v.size());
    for (index_t b = 0; b < batch; ++b)
        for (index_t h = 0; h < H; ++h)
            for (index_t j = 0; j < L; ++j) {
                const S* kf = kern.data() + h * channels * L;
                auto at = [&](index_t l) { return double(v[static_cast<std::size_t>((b * L + l) * H + h)]); };
                double acc = double(D[static_cast<std::size_t>(h)]) * at(j);
                for (index_t l = std::max<index_t>(0, j - sup + 1); l <= j; ++l) acc += double(kf[j - l]) * at(l);
                if (channels == 2)
                    for (index_t l = j; l < std::min(L, j + sup); ++l) acc += double(kf[L + l - j]) * at(l);
                want[static_cast<std::size_t>((b * L + j) * H + h)] = acc;
            }
    return want;
}

// max |y − want| / max |want|
template <class S>
double max_rel_diff(const std::vector<S>& y, const std::vector<double>& want) {
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
        diff = std::max(diff, std::abs(double(y[i]) - want[i]));
        scale = std::max(scale, std::abs(want[i]));
    }
    return diff / scale;
}
}  // namespace

TEST_CASE_TEMPLATE("bidirectional conv: FFT, direct and the O(L^2) definition agree", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    using B = typename C::backend;
    // float: the direct path sums up to L terms in order (4099 here), hence 1e-5.
    const double tol = std::is_same_v<S, float> ? 1e-5 : 1e-12;
    std::mt19937 rng(11);
    std::normal_distribution<double> n01;
    for (index_t channels : {1, 2})
        for (index_t L : {1, 2, 3, 7, 63, 64, 65, 100, 257, 1000, 4099}) {
            const index_t batch = 2, H = 5;
            std::vector<S> v(batch * L * H), kern(H * channels * L), D(H);
            for (auto& x : v) x = static_cast<S>(n01(rng));
            for (index_t i = 0; i < H * channels * L; ++i) kern[i] = static_cast<S>(n01(rng) * std::exp(-0.01 * double(i % L)));
            for (auto& x : D) x = static_cast<S>(n01(rng));
            const std::vector<double> want = conv_definition(v, kern, D, batch, L, H, channels, L);
            auto source = [&](index_t h0, index_t h1, index_t len, S* out, int) {
                std::copy_n(kern.data() + h0 * channels * len, (h1 - h0) * channels * len, out);
            };
            for (index_t direct_max : {index_t{0}, index_t{1} << 20}) {
                std::vector<S> y = v;  // in place, as the encoder runs it
                locost::ops::bidirectional_conv<B>(y.data(), y.data(), batch, L, H, channels, D.data(), source,
                                                   locost::ops::conv_options{locost::ops::conv_mode::exact, direct_max});
                CAPTURE(L);
                CAPTURE(channels);
                CAPTURE(direct_max);
                CHECK(max_rel_diff(y, want) < tol);
            }
        }
}

namespace {
// A kernel source whose kernels are zero from lag `sup` on, and which says so.
template <class S>
struct short_support_source {
    const std::vector<S>* kern;
    index_t channels, sup;
    void operator()(index_t h0, index_t h1, index_t len, S* out, int) const {
        std::copy_n(kern->data() + h0 * channels * len, (h1 - h0) * channels * len, out);
    }
    index_t support(index_t, index_t) const { return sup; }
};
}  // namespace

TEST_CASE_TEMPLATE("bidirectional conv: overlap-save blocks for short-support kernels equal the definition", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    using B = typename C::backend;
    const double tol = std::is_same_v<S, float> ? 1e-5 : 1e-12;
    // The blocked form is what these lengths and supports take (a block size of at most M/2).
    for (auto [L, sup] : {std::pair<index_t, index_t>{4099, 17}, {20000, 150}, {20000, 1}, {300, 2}}) {
        const auto geo = locost::ops::conv_geometry::make(L, {});
        CAPTURE(L);
        CHECK(locost::ops::conv_blocks::make(L, sup, geo.M).P > 0);
    }
    std::mt19937 rng(13);
    std::normal_distribution<double> n01;
    for (index_t channels : {1, 2})
        for (auto [L, sup] : {std::pair<index_t, index_t>{300, 2}, {4099, 17}, {4099, 1000}, {20000, 150}, {20000, 1}}) {
            const index_t batch = 2, H = 3;
            std::vector<S> v(static_cast<std::size_t>(batch * L * H)), kern(static_cast<std::size_t>(H * channels * L), S(0)), D(H);
            for (auto& x : v) x = static_cast<S>(n01(rng));
            for (index_t r = 0; r < H * channels; ++r)
                for (index_t l = 0; l < sup; ++l) kern[r * L + l] = static_cast<S>(n01(rng) * std::exp(-0.01 * double(l)));
            for (auto& x : D) x = static_cast<S>(n01(rng));
            const std::vector<double> want = conv_definition(v, kern, D, batch, L, H, channels, sup);
            std::vector<S> y = v;  // in place, as the encoder runs it
            locost::ops::bidirectional_conv<B>(y.data(), y.data(), batch, L, H, channels, D.data(),
                                               short_support_source<S>{&kern, channels, sup}, locost::ops::conv_options{});
            CAPTURE(L);
            CAPTURE(sup);
            CAPTURE(channels);
            CHECK(max_rel_diff(y, want) < tol);
        }
}

TEST_CASE_TEMPLATE("bidirectional conv: the original CUDA path's geometry, reproduced on request", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    using B = typename C::backend;
    const double tol = std::is_same_v<S, float> ? 2e-6 : 1e-12;
    std::mt19937 rng(12);
    std::normal_distribution<double> n01;
    for (index_t L : {5, 6, 8, 16, 100, 128, 1000}) {
        const index_t H = 3;
        std::vector<S> v(L * H), kern(H * 2 * L), D(H, S(0.5));
        for (auto& x : v) x = static_cast<S>(n01(rng));
        for (auto& x : kern) x = static_cast<S>(n01(rng));
        // The original CUDA path: L' = L rounded up to even, fft size M = max(2·next_pow2(L'), 16),
        // a 2L'-long circular kernel (kb[j] at 2L' − j) zero-padded to M: a size-M circular
        // convolution, evaluated here by its definition.
        index_t Le = L + L % 2, M = 1;
        while (M < Le) M *= 2;
        M = std::max<index_t>(2 * M, 16);
        const locost::ops::conv_geometry geo{M, 2 * Le, false};
        auto source = [&](index_t h0, index_t h1, index_t len, S* out, int) {
            std::copy_n(kern.data() + h0 * 2 * len, (h1 - h0) * 2 * len, out);
        };
        std::vector<S> y(v.size()), exact(v.size());
        locost::ops::bidirectional_conv<B>(v.data(), y.data(), 1, L, H, 2, D.data(), source,
                                           locost::ops::conv_options{locost::ops::conv_mode::original_cuda});
        locost::ops::bidirectional_conv<B>(v.data(), exact.data(), 1, L, H, 2, D.data(), source, locost::ops::conv_options{});
        double diff = 0, scale = 0, vs_exact = 0;
        for (index_t h = 0; h < H; ++h) {
            std::vector<S> c(M);
            locost::ops::circular_kernel(kern.data() + h * 2 * L, kern.data() + h * 2 * L + L, L, geo, c.data());
            for (index_t j = 0; j < L; ++j) {
                double acc = double(D[h]) * double(v[j * H + h]);
                for (index_t l = 0; l < L; ++l) acc += double(c[((j - l) % M + M) % M]) * double(v[l * H + h]);
                diff = std::max(diff, std::abs(acc - double(y[j * H + h])));
                scale = std::max(scale, std::abs(acc));
                vs_exact = std::max(vs_exact, std::abs(double(exact[j * H + h]) - double(y[j * H + h])));
            }
        }
        CAPTURE(L);
        CHECK(diff / scale < tol);
        // Equal to the exact definition only when L' is a power of two of at least 8.
        const bool pow2 = L >= 8 && (L & (L - 1)) == 0;
        CHECK((vs_exact / scale < tol) == pow2);
    }
}
