// The S4D kernels of the LOCOST encoder (layers/s4d_kernel.hpp) against the original
// implementation's kernels (tests/data/reference) and against their definition in double
// precision: float32 over a million positions, and the support past which a kernel is zero.
#include "models/locost_encoder.hpp"

#include <cmath>
#include <limits>
#include <random>

TEST_CASE_TEMPLATE("s4d kernel: equals the original's kernels and circular layout", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    const checkpoint_kernels<S> kernels(tiny_dir);
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    const index_t L = 100, H = 64;
    for (index_t layer = 0; layer < 2; ++layer) {
        const std::string p = "kernel.L100.layer" + std::to_string(layer);
        const auto fwd = ref.floats(p + ".forward"), bwd = ref.floats(p + ".backward"), circ = ref.floats(p + ".bidirectional_2L");
        std::vector<S> ours_f(H * L), ours_b(H * L), ours_c(H * 2 * L);
        const locost::ops::conv_geometry geo{2 * L, 2 * L, false};  // the original's reference path: M = 2L
        for (index_t h = 0; h < H; ++h) {
            const auto k = kernels(layer, h, L);  // (2, L)
            std::copy_n(k.data(), L, ours_f.data() + h * L);
            std::copy_n(k.data() + L, L, ours_b.data() + h * L);
            locost::ops::circular_kernel(k.data(), k.data() + L, L, geo, ours_c.data() + h * 2 * L);
        }
        CAPTURE(layer);
        CHECK(rel_error(ours_f.data(), fwd) < 1e-5);
        CHECK(rel_error(ours_b.data(), bwd) < 1e-5);
        CHECK(rel_error(ours_c.data(), circ) < 1e-5);
    }
}

TEST_CASE("s4d kernel: float32 stays within 1e-5 of float64 up to l = 10^6") {
    // Channels whose modes decay fast (the original init) and barely at all (Re A = −1e-4,
    // dt = 1e-3: |z|^l = e^(−0.1) at l = 10^6, the case where a running power drifts most).
    locost::layers::s4d_kernel_parameters p;
    p.channels = 2;
    p.H = 3;
    p.modes = 64;
    std::mt19937 rng(5);
    std::normal_distribution<float> n01;
    const float log_dt[3] = {std::log(1e-3f), std::log(1e-2f), std::log(1e-1f)};
    for (index_t h = 0; h < p.H; ++h) {
        p.log_dt.push_back(log_dt[h]);
        for (index_t m = 0; m < p.modes; ++m) {
            p.inv_A_real.push_back(h == 0 ? std::log(1e-4f) : std::log(0.5f));
            p.A_imag.push_back(3.14159265f * static_cast<float>(m));
            p.B.push_back(1.0f + 0.3f * n01(rng));
            p.B.push_back(0.3f * n01(rng));
        }
    }
    for (index_t i = 0; i < 2 * p.H * p.modes * 2; ++i) p.C.push_back(0.7071f * n01(rng));
    const locost::layers::s4d_kernel<float, cpu> k32(p);
    const index_t L = 1'000'000;
    std::vector<float> out(2 * L);
    locost::layers::s4d_kernel<float, cpu>::scratch s;
    for (index_t h = 0; h < p.H; ++h) {
        k32.compute(h, L, out.data(), s);
        for (index_t c = 0; c < 2; ++c) {
            double diff = 0, scale = 0;
            for (index_t l = 0; l < L; l += (l < 4096 ? 1 : 997)) {
                const double r = k32.reference(c, h, l);
                diff = std::max(diff, std::abs(out[c * L + l] - r));
                scale = std::max(scale, std::abs(r));
            }
            CAPTURE(h);
            CAPTURE(c);
            CHECK(diff / scale < 1e-5);
        }
    }
}

TEST_CASE_TEMPLATE("s4d kernel: past the support the kernel is zero, and what is dropped is below the bound", S, float, double) {
    // The original's initialisation: dt log-uniform in [0.001, 0.1], Re A = −0.5.
    locost::layers::s4d_kernel_parameters p;
    p.channels = 2;
    p.H = 4;
    p.modes = 32;
    std::mt19937 rng(8);
    std::normal_distribution<float> n01;
    for (index_t h = 0; h < p.H; ++h) {
        p.log_dt.push_back(std::log(1e-3f) + static_cast<float>(h) / 3.0f * std::log(100.0f));
        for (index_t m = 0; m < p.modes; ++m) {
            p.inv_A_real.push_back(std::log(0.5f));
            p.A_imag.push_back(3.14159265f * static_cast<float>(m));
            p.B.push_back(1.0f);
            p.B.push_back(0.0f);
        }
    }
    for (index_t i = 0; i < 2 * p.H * p.modes * 2; ++i) p.C.push_back(0.7071f * n01(rng));
    const locost::layers::s4d_kernel<S, cpu> k(p);
    const double rel = std::numeric_limits<S>::epsilon() / 64;
    const index_t L = 120'000;
    std::vector<S> out(2 * L);
    typename locost::layers::s4d_kernel<S, cpu>::scratch s;
    for (index_t h = 0; h < p.H; ++h) {
        CAPTURE(h);
        const index_t sup = k.support(h);
        // dt = 0.001: the slowest mode needs ~ln(64/ε)/0.0005 (float: ~42K; double: ~80K).
        CHECK(sup > 0);
        CHECK(sup < L);
        CHECK(k.tail_fraction(h, static_cast<double>(sup)) <= rel);
        CHECK(k.tail_fraction(h, 0.97 * static_cast<double>(sup)) > rel);  // and not much longer than needed
        k.compute(h, L, out.data(), s);
        for (index_t c = 0; c < 2; ++c) {
            double head = 0, dropped = 0, diff = 0, scale = 0;
            index_t nonzero_past_support = 0;
            for (index_t l = 0; l < L; ++l) {
                const double r = k.reference(c, h, l), got = static_cast<double>(out[c * L + l]);
                if (l < sup) {
                    head += std::abs(r);
                    diff = std::max(diff, std::abs(got - r));
                    scale = std::max(scale, std::abs(r));
                } else {
                    dropped += std::abs(r);
                    nonzero_past_support += got != 0.0;
                }
            }
            CAPTURE(c);
            CHECK(nonzero_past_support == 0);
            CHECK(diff / scale < (std::is_same_v<S, float> ? 1e-5 : 1e-12));
            CHECK(dropped <= 64 * rel * head);
        }
    }
}
