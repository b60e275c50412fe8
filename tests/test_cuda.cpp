// The CUDA backend (label "gpu"): its ops against simple double-precision loops, for float and
// double, and the LOCOST encoder against the original code's reference outputs and against the
// CPU backend. Host code: the backend's kernels come from the locost::locost_cuda library.
// Without a GPU the program says why and exits 77, which CTest reports as Skipped
// (SKIP_RETURN_CODE): a check that did not run is never counted as passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include "helpers.hpp"

#include <locost/backend/cuda/cuda.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using locost::cuda;
using locost::index_t;

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed, double lo = -2, double hi = 2) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(g));
    return v;
}

template <class T>
locost::tensor<T, cuda> upload(const std::vector<T>& v) {
    locost::tensor<T, cuda> d({static_cast<index_t>(v.size())});
    locost::transfer<cuda>::upload(d.data(), v.data(), v.size());
    return d;
}

template <class T>
std::vector<T> download(const locost::tensor<T, cuda>& d) {
    std::vector<T> v(static_cast<std::size_t>(d.numel()));
    locost::transfer<cuda>::download(v.data(), d.data(), v.size());
    return v;
}

template <class T>
double max_rel_error(const std::vector<T>& got, const std::vector<double>& ref) {
    REQUIRE(got.size() == ref.size());
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(got[i]) - ref[i]));
        scale = std::max(scale, std::abs(ref[i]));
    }
    return scale > 0 ? diff / scale : diff;
}

// float: a few ulps of the largest value after sums of ~1000 terms; double: far below.
template <class T>
constexpr double tolerance() { return std::is_same_v<T, float> ? 2e-5 : 1e-12; }

double act_ref(locost::activation a, double x) {
    switch (a) {
    case locost::activation::relu: return x > 0 ? x : 0;
    case locost::activation::gelu_tanh: return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case locost::activation::gelu_erf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    default: return x / (1 + std::exp(-x));
    }
}

} // namespace

TEST_CASE_TEMPLATE("cuda gemm: every transpose and stride against the double loop", T, float, double) {
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            CAPTURE(ta);
            CAPTURE(tb);
            const index_t m = 37, n = 53, k = 129, lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
            const auto a = random_values<T>(static_cast<std::size_t>((ta ? k : m) * lda), 1);
            const auto b = random_values<T>(static_cast<std::size_t>((tb ? n : k) * ldb), 2);
            const auto c0 = random_values<T>(static_cast<std::size_t>(m * ldc), 3);
            const T alpha = T(0.75), beta = T(-0.5);
            auto da = upload(a), db = upload(b), dc = upload(c0);
            locost::ops::gemm<cuda, T>({ta, tb, m, n, k, lda, ldb, ldc}, alpha, da.data(), db.data(), beta, dc.data());
            const auto c = download(dc);
            std::vector<double> ref(c0.begin(), c0.end());
            for (index_t i = 0; i < m; ++i)
                for (index_t j = 0; j < n; ++j) {
                    double s = 0;
                    for (index_t p = 0; p < k; ++p)
                        s += static_cast<double>(ta ? a[p * lda + i] : a[i * lda + p]) * static_cast<double>(tb ? b[j * ldb + p] : b[p * ldb + j]);
                    ref[i * ldc + j] = alpha * s + beta * static_cast<double>(c0[i * ldc + j]);
                }
            CHECK(max_rel_error(c, ref) < tolerance<T>());
        }
}

TEST_CASE_TEMPLATE("cuda rms_norm and layer_norm: strided rows against the double loop", T, float, double) {
    const index_t rows = 300, n = 771, ld = 800;
    const auto x = random_values<T>(static_cast<std::size_t>(rows * ld), 4, -3, 5);
    const auto w = random_values<T>(static_cast<std::size_t>(n), 5), b = random_values<T>(static_cast<std::size_t>(n), 6);
    auto dx = upload(x), dw = upload(w), db = upload(b), dy = upload(std::vector<T>(static_cast<std::size_t>(rows * ld), T(7)));
    const T eps = T(1e-6);
    locost::ops::rms_norm<cuda, T>(dx.data(), ld, dw.data(), eps, dy.data(), ld, rows, n);
    auto y = download(dy);
    std::vector<double> ref(y.size(), 7.0);
    for (index_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (index_t i = 0; i < n; ++i) ss += double(x[r * ld + i]) * double(x[r * ld + i]);
        const double inv = 1 / std::sqrt(ss / double(n) + double(eps));
        for (index_t i = 0; i < n; ++i) ref[r * ld + i] = double(x[r * ld + i]) * inv * double(w[i]);
    }
    CHECK(max_rel_error(y, ref) < tolerance<T>());  // the padding between rows is untouched too

    locost::ops::layer_norm<cuda, T>(dx.data(), ld, dw.data(), db.data(), eps, dy.data(), ld, rows, n);
    y = download(dy);
    for (index_t r = 0; r < rows; ++r) {
        double s = 0, ss = 0;
        for (index_t i = 0; i < n; ++i) s += double(x[r * ld + i]);
        const double mean = s / double(n);
        for (index_t i = 0; i < n; ++i) ss += (double(x[r * ld + i]) - mean) * (double(x[r * ld + i]) - mean);
        const double inv = 1 / std::sqrt(ss / double(n) + double(eps));
        for (index_t i = 0; i < n; ++i) ref[r * ld + i] = (double(x[r * ld + i]) - mean) * inv * double(w[i]) + double(b[i]);
    }
    CHECK(max_rel_error(y, ref) < tolerance<T>());
}

TEST_CASE_TEMPLATE("cuda softmax_rows: masked entries give 0, an all-masked row gives zeros", T, float, double) {
    const index_t rows = 5, n = 1000, ld = 1003;
    auto x = random_values<T>(static_cast<std::size_t>(rows * ld), 7, -20, 20);
    const T inf = std::numeric_limits<T>::infinity();
    for (index_t i = 0; i < n; i += 3) x[1 * ld + i] = -inf;
    for (index_t i = 0; i < n; ++i) x[3 * ld + i] = -inf;
    auto dx = upload(x);
    locost::ops::softmax_rows<cuda, T>(dx.data(), rows, n, ld);
    const auto y = download(dx);
    std::vector<double> ref(x.begin(), x.end());
    for (index_t r = 0; r < rows; ++r) {
        double m = -INFINITY, s = 0;
        for (index_t i = 0; i < n; ++i) m = std::max(m, double(x[r * ld + i]));
        for (index_t i = 0; i < n; ++i) s += std::isinf(m) ? 0 : std::exp(double(x[r * ld + i]) - m);
        for (index_t i = 0; i < n; ++i) ref[r * ld + i] = std::isinf(m) ? 0 : std::exp(double(x[r * ld + i]) - m) / s;
    }
    CHECK(max_rel_error(y, ref) < tolerance<T>());
    for (index_t i = 0; i < n; ++i) CHECK(y[3 * ld + i] == T(0));
}

TEST_CASE_TEMPLATE("cuda activations, gate, mul, add_rows, embeddings against the double loop", T, float, double) {
    const index_t rows = 64, n = 333, ld = 340, count = rows * ld;
    const auto a = random_values<T>(static_cast<std::size_t>(count), 8, -6, 6), b = random_values<T>(static_cast<std::size_t>(count), 9);
    using locost::activation;
    auto run_act = [&](auto tag, activation act) {
        constexpr activation A = decltype(tag)::value;
        CAPTURE(static_cast<int>(act));
        auto dx = upload(a);
        locost::ops::activate<A, cuda, T>(dx.data(), count);
        std::vector<double> ref(a.size());
        for (std::size_t i = 0; i < a.size(); ++i) ref[i] = act_ref(act, double(a[i]));
        CHECK(max_rel_error(download(dx), ref) < tolerance<T>());
        auto dg = upload(a), db = upload(b);
        locost::ops::gate<A, cuda, T>(dg.data(), db.data(), rows, n, ld);
        std::vector<double> gref(a.begin(), a.end());
        for (index_t r = 0; r < rows; ++r)
            for (index_t i = 0; i < n; ++i) gref[r * ld + i] = act_ref(act, double(a[r * ld + i])) * double(b[r * ld + i]);
        CHECK(max_rel_error(download(dg), gref) < tolerance<T>());
    };
    run_act(std::integral_constant<activation, activation::relu>{}, activation::relu);
    run_act(std::integral_constant<activation, activation::gelu_tanh>{}, activation::gelu_tanh);
    run_act(std::integral_constant<activation, activation::gelu_erf>{}, activation::gelu_erf);
    run_act(std::integral_constant<activation, activation::silu>{}, activation::silu);

    auto dy = upload(a), dq = upload(b);
    locost::ops::mul<cuda, T>(dy.data(), dq.data(), count);
    std::vector<double> ref(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) ref[i] = double(a[i]) * double(b[i]);
    CHECK(max_rel_error(download(dy), ref) < tolerance<T>());

    auto dr = upload(a), dbias = upload(std::vector<T>(b.begin(), b.begin() + ld));
    locost::ops::add_rows<cuda, T>(dr.data(), dbias.data(), rows, ld);
    for (std::size_t i = 0; i < a.size(); ++i) ref[i] = double(a[i]) + double(b[i % static_cast<std::size_t>(ld)]);
    CHECK(max_rel_error(download(dr), ref) < tolerance<T>());

    const index_t vocab = 50, dim = 24;
    const auto table = random_values<T>(static_cast<std::size_t>(vocab * dim), 10);
    const std::vector<std::int64_t> ids = {3, 0, 49, 3, 17};
    auto dt = upload(table);
    auto dids = upload(ids);
    locost::tensor<T, cuda> out({static_cast<index_t>(ids.size()) * dim});
    locost::ops::embedding<cuda, T>(dt.data(), dim, dids.data(), static_cast<index_t>(ids.size()), out.data(), T(2));
    locost::ops::add_embedding<cuda, T>(dt.data(), dim, dids.data(), static_cast<index_t>(ids.size()), out.data());
    std::vector<double> eref;
    for (auto id : ids)
        for (index_t c = 0; c < dim; ++c) eref.push_back(3.0 * double(table[id * dim + c]));
    CHECK(max_rel_error(download(out), eref) < tolerance<T>());
}

TEST_CASE("cuda memory: a round trip is exact, and an impossible allocation is a clear error") {
    const auto v = random_values<float>(12345, 11);
    locost::tensor<float> h({12345});
    std::copy(v.begin(), v.end(), h.data());
    const auto back = locost::to_host(locost::to_device(h));
    CHECK(std::equal(v.begin(), v.end(), back.data()));
    bool thrown = false;
    try {
        locost::tensor<float, cuda> huge({index_t{1} << 45});  // 128 TiB
    } catch (const locost::error& e) {
        thrown = true;
        CHECK(e.id() == "cuda.out_of_memory");
        CHECK(e.message().rfind("cudaMalloc(140737.49 GB): out of memory; the GPU has ", 0) == 0);
    }
    CHECK(thrown);
}

namespace {

// Random S4D parameters: channel 0 decays slowly (Re A = −1e-4, dt = 1e-3), the others as the
// original init does.
locost::layers::s4d_kernel_parameters random_s4d(index_t H, index_t modes, index_t channels, unsigned seed) {
    locost::layers::s4d_kernel_parameters p;
    p.channels = channels;
    p.H = H;
    p.modes = modes;
    std::mt19937 rng(seed);
    std::normal_distribution<float> n01;
    for (index_t h = 0; h < H; ++h) {
        p.log_dt.push_back(h == 0 ? std::log(1e-3f) : std::log(1e-3f) + 4.6f * static_cast<float>(h) / static_cast<float>(H));
        for (index_t m = 0; m < modes; ++m) {
            p.inv_A_real.push_back(h == 0 ? std::log(1e-4f) : std::log(0.5f));
            p.A_imag.push_back(3.14159265f * static_cast<float>(m));
            p.B.push_back(1.0f + 0.3f * n01(rng));
            p.B.push_back(0.3f * n01(rng));
        }
    }
    for (index_t i = 0; i < channels * H * modes * 2; ++i) p.C.push_back(0.7071f * n01(rng));
    return p;
}

} // namespace

TEST_CASE_TEMPLATE("cuda s4d kernels: the block form on the GPU equals the definition in double", T, float, double) {
    const auto p = random_s4d(6, 32, 2, 21);
    const locost::layers::s4d_kernel<T, cuda> k(p);
    for (index_t L : {1, 17, 1000, 70001}) {
        CAPTURE(L);
        locost::tensor<T, cuda> out({p.H * 2 * L});
        locost::ops::ssm_kernels<cuda>(k, 0, p.H, L, out.data());
        const auto got = locost::to_host(out);
        // A group that does not start at channel 0 lands at the start of its buffer.
        locost::tensor<T, cuda> part({2 * 2 * L});
        typename locost::layers::s4d_kernel<T, cuda>::scratch unused;
        locost::ops::ssm_kernel_group<cuda>(k, 3, 5, L, part.data(), unused);
        const auto got_part = locost::to_host(part);
        for (index_t h = 0; h < p.H; ++h)
            for (index_t c = 0; c < 2; ++c) {
                double diff = 0, scale = 0;
                for (index_t l = 0; l < L; l += (l < 2048 ? 1 : 97)) {
                    const double r = k.reference(c, h, l);
                    diff = std::max(diff, std::abs(double(got[(h * 2 + c) * L + l]) - r));
                    if (h >= 3 && h < 5) diff = std::max(diff, std::abs(double(got_part[((h - 3) * 2 + c) * L + l]) - r));
                    scale = std::max(scale, std::abs(r));
                }
                CAPTURE(h);
                CAPTURE(c);
                CHECK(diff / scale < (std::is_same_v<T, float> ? 1e-5 : 1e-12));
            }
    }
}

TEST_CASE_TEMPLATE("cuda bidirectional conv: cuFFT against the O(L^2) definition, both geometries", T, float, double) {
    std::mt19937 rng(11);
    std::normal_distribution<double> n01;
    for (auto mode : {locost::ops::conv_mode::exact, locost::ops::conv_mode::original_cuda})
        for (index_t channels : {1, 2})
            for (index_t L : {1, 2, 7, 64, 100, 1000, 4099}) {
                const index_t batch = 2, H = 5;
                std::vector<T> v(static_cast<std::size_t>(batch * L * H)), kern(static_cast<std::size_t>(H * channels * L)), D(5);
                for (auto& x : v) x = static_cast<T>(n01(rng));
                for (index_t i = 0; i < H * channels * L; ++i) kern[i] = static_cast<T>(n01(rng) * std::exp(-0.01 * double(i % L)));
                for (auto& x : D) x = static_cast<T>(n01(rng));
                const auto geo = locost::ops::conv_geometry::make(L, {mode});
                std::vector<double> want(v.size());
                for (index_t b = 0; b < batch; ++b)
                    for (index_t h = 0; h < H; ++h) {
                        // The circular kernel of the geometry (the definition both backends share).
                        std::vector<T> c(static_cast<std::size_t>(geo.M));
                        const T* kf = kern.data() + h * channels * L;
                        locost::ops::circular_kernel(kf, channels == 2 ? kf + L : nullptr, L, geo, c.data());
                        for (index_t j = 0; j < L; ++j) {
                            double acc = double(D[h]) * double(v[(b * L + j) * H + h]);
                            for (index_t l = 0; l < L; ++l)
                                acc += double(c[((j - l) % geo.M + geo.M) % geo.M]) * double(v[(b * L + l) * H + h]);
                            want[(b * L + j) * H + h] = acc;
                        }
                    }
                auto dk = upload(kern), dD = upload(D);
                auto source = [&](index_t h0, index_t h1, index_t len, T* out, int) {
                    locost::transfer<cuda>::copy(out, dk.data() + h0 * channels * len, static_cast<std::size_t>((h1 - h0) * channels * len));
                };
                auto dy = upload(v);  // in place, as the encoder runs it
                locost::ops::bidirectional_conv<cuda>(dy.data(), dy.data(), batch, L, H, channels, dD.data(), source,
                                                      locost::ops::conv_options{mode});
                CAPTURE(L);
                CAPTURE(channels);
                CAPTURE(static_cast<int>(mode));
                CHECK(max_rel_error(download(dy), want) < (std::is_same_v<T, float> ? 1e-5 : 1e-12));
            }
}

TEST_CASE_TEMPLATE("cuda LOCOST encoder: the original code's reference cases, and the CPU backend", T, float, double) {
    using namespace test;
    const auto ck = locost::io::checkpoint::open(tiny_dir);
    auto gpu = locost::models::load_locost_encoder<cuda, T>(ck);
    auto host = locost::models::load_locost_encoder<locost::cpu, T>(ck);
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    for (const char* p : {"enc.L1", "enc.L7", "enc.L64", "enc.L100", "enc.L1000", "enc.padded"}) {
        CAPTURE(p);
        std::vector<bool> keep;
        const auto h = encode_reference_case(gpu, ref, p, keep);
        CHECK(rel_error(h.data(), ref.floats(std::string(p) + ".last_hidden_state"), keep) < parity);
        const auto c = encode_reference_case(host, ref, p, keep);
        CHECK(rel_error(h.data(), std::vector<float>(c.begin(), c.end()), keep) < parity);
    }
}

int main(int argc, char** argv) {
    try {
        const auto gpus = locost::cuda_devices();
        std::printf("CUDA tests on %s\n", gpus.front().name.c_str());
    } catch (const locost::error& e) {
        std::printf("SKIPPED: %s; the CUDA backend's tests need a GPU\n", e.what());
        return 77;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
