// The LOCOST encoder against the original implementation's outputs (tests/data/reference, made by
// the original code; tests/data/own, our own runs of the original code on other variants), and
// its parts against plain scalar definitions. One body per (backend, scalar) configuration.
#include "helpers.hpp"

#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

namespace {

using namespace test;
using locost::cpu;
using locost::tensor;

template <class Backend, class Scalar>
struct config {
    using backend = Backend;
    using scalar = Scalar;
};
#define LOCOST_CONFIGS config<locost::cpu, float>, config<locost::cpu, double>

// Tolerance of a (backend, scalar) configuration against references made in float32.
template <class Scalar>
constexpr double tolerance = parity;

template <class Backend, class Scalar>
locost::models::any_encoder<Scalar, Backend> load(const std::string& dir, locost::models::encoder_options o = {}) {
    locost::models::model_options m;
    m.encoder = o;
    return locost::models::load_encoder<Scalar, Backend>(locost::io::checkpoint::open(dir), m);
}

// The S4D kernels of a LOCOST checkpoint's layers, read as its encoder reads them.
template <class Scalar>
class checkpoint_kernels {
public:
    explicit checkpoint_kernels(const std::string& dir) : ck_(locost::io::checkpoint::open(dir)), c_(config_of(ck_)) {}
    const locost::models::locost_config& config() const { return c_; }
    // K[c, h, 0..L) of layer `layer`: (channels, L).
    std::vector<Scalar> operator()(index_t layer, index_t h, index_t L) const {
        locost::layers::checkpoint_reader reader(ck_);
        const locost::layers::tensor_source root(reader);
        const auto at = locost::models::t5_layout::layer(root, locost::layers::model_stack::encoder, layer, 0) / "ssm_layer" / "kernel";
        const locost::layers::s4d_kernel<Scalar, cpu> k(
            locost::layers::s4d_kernel_parameters::read(at, c_.bidirectional ? 2 : 1, c_.d_model, c_.d_state / 2));
        std::vector<Scalar> out(static_cast<std::size_t>(k.channels() * L));
        typename locost::layers::s4d_kernel<Scalar, cpu>::scratch s;
        k.compute(h, L, out.data(), s);
        return out;
    }

private:
    locost::io::checkpoint ck_;
    locost::models::locost_config c_;
};

} // namespace

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
} // namespace

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
} // namespace

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

TEST_CASE_TEMPLATE("encoder: every shared reference case of the original code", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    auto enc = load<typename C::backend, S>(tiny_dir);
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    for (const char* p : {"enc.L1", "enc.L7", "enc.L64", "enc.L100", "enc.L1000", "enc.padded"}) {
        CAPTURE(p);
        CHECK(encode_error(enc, ref, p) < tolerance<S>);
    }
}

TEST_CASE_TEMPLATE("encoder: per-block hidden states and the S4D module's input and output", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    const auto ck = locost::io::checkpoint::open(tiny_dir);
    auto enc = locost::models::load_encoder<S, typename C::backend>(ck);
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    const auto ids = ref.ints("enc.L100.input_ids");
    const index_t L = 100, H = 64;
    std::vector<std::vector<S>> after_ssm, after_ff;
    const auto h = enc.forward(ids.data(), nullptr, 1, L, {},
                               [&](index_t, locost::models::block_stage st, locost::view<const S> x) {
                                   (st == locost::models::block_stage::after_mixer ? after_ssm : after_ff)
                                       .emplace_back(x.data, x.data + x.numel());
                               });
    REQUIRE(after_ff.size() == 2);
    CHECK(rel_error(after_ff[0].data(), ref.floats("enc.L100.hidden_states.1")) < tolerance<S>);
    // The shared file's last hidden-state entry is the original's output_hidden_states tuple's,
    // which is taken after the final norm (tests/data/own/README.md, surprise 9).
    CHECK(rel_error(h.data(), ref.floats("enc.L100.hidden_states.2")) < tolerance<S>);
    // S4D module of block 0: input RMSNorm(embeddings), output = residual increment.
    const auto emb = ref.floats("enc.L100.hidden_states.0");
    const auto w = ck.load_f32("encoder.block.0.layer.0.layer_prenorm.weight", {H});
    std::vector<double> in(L * H), out(L * H);
    for (index_t l = 0; l < L; ++l) {
        double ss = 0;
        for (index_t k = 0; k < H; ++k) ss += double(emb[l * H + k]) * emb[l * H + k];
        const double inv = 1.0 / std::sqrt(ss / H + 1e-6);
        for (index_t k = 0; k < H; ++k) {
            in[l * H + k] = emb[l * H + k] * inv * w[k];
            out[l * H + k] = double(after_ssm[0][l * H + k]) - emb[l * H + k];
        }
    }
    CHECK(rel_error(in.data(), ref.floats("enc.L100.block0.ssm_layer.input")) < tolerance<S>);
    CHECK(rel_error(out.data(), ref.floats("enc.L100.block0.ssm_layer.output")) < tolerance<S>);
}

TEST_CASE_TEMPLATE("encoder: own references of the original code (relu, causal, ungated, bf16, f16 .bin)", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    for (const char* variant : {"relu_small", "plain_causal", "tiny_bf16", "tiny_f16_bin"}) {
        CAPTURE(variant);
        auto enc = load<typename C::backend, S>(own_dir + "/" + variant);
        const checkpoint_kernels<S> kernels(own_dir + "/" + variant);
        const reference ref(own_dir + "/" + std::string(variant) + ".safetensors");
        for (const char* p : {"enc.L1", "enc.L5", "enc.L37", "enc.L300", "enc.padded"}) {
            CAPTURE(p);
            CHECK(encode_error(enc, ref, p) < tolerance<S>);
        }
        const index_t H = kernels.config().d_model, L = 37, layers = kernels.config().num_layers;
        const bool bidir = kernels.config().bidirectional;
        for (index_t layer = 0; layer < layers; ++layer) {
            const std::string p = "kernel.L37.layer" + std::to_string(layer);
            std::vector<S> f(H * L), b(H * L);
            for (index_t h = 0; h < H; ++h) {
                const auto k = kernels(layer, h, L);
                std::copy_n(k.data(), L, f.data() + h * L);
                if (bidir) std::copy_n(k.data() + L, L, b.data() + h * L);
            }
            CHECK(rel_error(f.data(), ref.floats(p + ".forward")) < 1e-5);
            if (bidir) CHECK(rel_error(b.data(), ref.floats(p + ".backward")) < 1e-5);
        }
    }
}

TEST_CASE("encoder: a 20000-token input (long reference of the original code)") {
    auto enc = load<cpu, float>(tiny_dir);
    const reference ref(own_dir + "/long.safetensors");
    CHECK(encode_error(enc, ref, "enc.L20000") < parity);
}

TEST_CASE("encoder: kernel cache on, off, and at shorter lengths give the same states") {
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    locost::models::encoder_options no_cache;
    no_cache.kernel_cache_bytes = 0;
    auto cached = load<cpu, float>(tiny_dir), uncached = load<cpu, float>(tiny_dir, no_cache);
    const auto ids = ref.ints("enc.L1000.input_ids");
    const auto a = cached.forward(ids.data(), nullptr, 1, 1000);
    const auto b = uncached.forward(ids.data(), nullptr, 1, 1000);
    CHECK(std::equal(a.data(), a.data() + a.numel(), b.data()));
    // The cache now covers 1000: a shorter input reuses it and still matches its reference.
    CHECK(encode_error(cached, ref, "enc.L100") < parity);
    // Small tiles (many GEMM calls, ragged last tile) give the same states too.
    locost::models::encoder_options tiles;
    tiles.tile_rows = 7;
    auto tiled = load<cpu, float>(tiny_dir, tiles);
    const auto c = tiled.forward(ids.data(), nullptr, 1, 1000);
    CHECK(rel_error(c.data(), std::vector<float>(a.data(), a.data() + a.numel())) < 1e-6);
}

TEST_CASE("encoder: an interrupt_check stops an encode inside its first layer, and the encoder gives the same states after") {
    struct stop_now {};
    auto enc = load<cpu, float>(tiny_dir);
    std::vector<std::int64_t> ids(20000);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(3 + i * 7919 % 500);
    const auto L = static_cast<index_t>(ids.size());
    const auto plain = enc.forward(ids.data(), nullptr, 1, L);
    // A check that only counts: the same states, and it ran many times per layer (inside the
    // layers' convolutions and products, not only between layers).
    int checks = 0;
    index_t layers = 0;
    {
        const locost::interrupt_check count([&] { ++checks; });
        const auto counted = enc.forward(ids.data(), nullptr, 1, L, [&](const locost::models::encode_progress& p) { layers = p.layers; });
        CHECK(std::equal(plain.data(), plain.data() + plain.numel(), counted.data()));
    }
    REQUIRE(layers > 0);
    CHECK(checks > 10 * layers);
    // A check that throws on its third call: the exception leaves forward() before the first
    // layer has ended (progress never reports layer 1).
    index_t reached = 0;
    checks = 0;
    {
        const locost::interrupt_check stop([&] {
            if (++checks == 3) throw stop_now{};
        });
        CHECK_THROWS_AS(enc.forward(ids.data(), nullptr, 1, L, [&](const locost::models::encode_progress& p) { reached = std::max(reached, p.layer); }),
                        stop_now);
    }
    CHECK(checks == 3);
    CHECK(reached == 0);
    const auto after = enc.forward(ids.data(), nullptr, 1, L);
    CHECK(std::equal(plain.data(), plain.data() + plain.numel(), after.data()));
}

TEST_CASE("encoder: errors name the input and what was expected") {
    auto enc = load<cpu, float>(tiny_dir);
    const std::int64_t bad[] = {5, 512, 7};
    const std::string config = tiny_dir + "/config.json";
    CHECK_THROWS_WITH(enc.forward(bad, nullptr, 1, 3),
                      std::string("[locost.ids.out_of_vocab] " + config + ": token id 512 at [0][1] is not in [0, 512)").c_str());
    CHECK_THROWS_WITH(enc.forward(bad, nullptr, 1, 0),
                      std::string("[locost.encode.empty_input] " + config + ": nothing to encode (batch 1 x length 0)").c_str());
    const std::int64_t ok[] = {5, 6};
    const float mask[] = {1.0f, 0.5f};
    CHECK_THROWS_WITH(enc.forward(ok, mask, 1, 2),
                      std::string("[locost.encode.bad_mask] " + config + ": attention mask value 0.500000 at [0][1] is not 0 or 1").c_str());

    // A config with num_ssm_heads 2 (and weights shaped for it) is refused by name.
    const std::string dir = std::string(LOCOST_TEST_TMP) + "/ssm-heads";
    std::filesystem::create_directories(dir);
    auto cfg = nlohmann::json::parse(locost::io::read_text_file(tiny_dir + "/config.json"));
    cfg["num_ssm_heads"] = 2;
    std::ofstream(dir + "/config.json") << cfg.dump();
    std::filesystem::copy_file(tiny_dir + "/model.safetensors", dir + "/model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    auto load_it = [&] { return load<cpu, float>(dir); };
    CHECK_THROWS_WITH(load_it(),
                      std::string("[locost.model.unsupported] " + dir +
                                  "/config.json: num_ssm_heads is 2, only 1 is supported (the original code runs num_ssm_heads > 1 only on "
                                  "its CUDA path, whose channel grouping is not specified; the released LOCOST checkpoints use 1)")
                          .c_str());
}
