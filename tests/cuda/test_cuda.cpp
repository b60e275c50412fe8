// The CUDA backend (label "gpu"): its ops against simple double-precision loops or the CPU
// kernels, for float and double; the LOCOST encoder against the original code's reference
// outputs and against the CPU backend; whole models (LOCOST decoding in every cross-attention
// form, beam search, the Hugging Face families and SLED) against the references and the CPU. Host code: the backend's kernels come from the
// locost::locost_cuda library.
// Without a GPU the program says why and exits 77, which CTest reports as Skipped
// (SKIP_RETURN_CODE): a check that did not run is never counted as passed. The same program also
// runs linked with the backend compiled against the host emulation of CUDA (tests/cuda_emulator,
// LOCOST_CUDA_EMULATED_TESTS; CTest "cuda_emulated"), which checks the kernels without a GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include "helpers.hpp"

#include <locost/backend/cuda/cuda.hpp>
#if defined(LOCOST_CUDA_EMULATED_TESTS)
#include "cuda_emulator/traffic.hpp"
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <thread>
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
constexpr double tolerance() {
    return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

double act_ref(locost::activation a, double x) {
    switch (a) {
    case locost::activation::relu: return x > 0 ? x : 0;
    case locost::activation::gelu_tanh: return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case locost::activation::gelu_erf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    default: return x / (1 + std::exp(-x));
    }
}

}  // namespace

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
                        s += static_cast<double>(ta ? a[p * lda + i] : a[i * lda + p]) *
                            static_cast<double>(tb ? b[j * ldb + p] : b[p * ldb + j]);
                    ref[i * ldc + j] = alpha * s + beta * static_cast<double>(c0[i * ldc + j]);
                }
            CHECK(max_rel_error(c, ref) < tolerance<T>());
        }
}

// Linear layers in every weight storage (ops/linear.hpp) against the CPU's kernel on the same
// stored weights: a few rows (a decoding step: the fused warp-per-channel kernel), more rows
// (widened blocks and SGEMM, bfloat16 products, int8 products); row lengths that allow eight-wide
// loads and int8 products (64), int8 products only (100) and neither (30); strided x and y, a
// factor and accumulation. The CPU and the GPU round x to bfloat16 and quantize it to int8 by one
// rule, so the only difference left is float32 summation order.
TEST_CASE("cuda linear: every weight storage against the CPU kernel, a few rows and many") {
    using locost::ops::weight_precision;
    const weight_precision storages[] = {weight_precision::native, weight_precision::bf16, weight_precision::i8,
                                         weight_precision::bf16_products, weight_precision::i8_products};
    for (const auto& [out, in] : {std::pair<index_t, index_t>{37, 64}, {21, 100}, {19, 30}})
        for (const index_t rows : {index_t{1}, index_t{3}, index_t{8}, index_t{9}, index_t{70}})
            for (const weight_precision p : storages)
                for (const bool accumulate : {false, true}) {
                    CAPTURE(out);
                    CAPTURE(in);
                    CAPTURE(rows);
                    CAPTURE(static_cast<int>(p));
                    CAPTURE(accumulate);
                    const index_t ldx = in + 3, ldy = out + 5;
                    const auto wv = random_values<float>(static_cast<std::size_t>(out * in), 11);
                    locost::tensor<float> w({out, in});
                    std::copy(wv.begin(), wv.end(), w.data());
                    const locost::layers::weight_matrix<float, cuda> gw(w, p);
                    const locost::layers::weight_matrix<float, locost::cpu> hw(w, p);
                    const auto x = random_values<float>(static_cast<std::size_t>(rows * ldx), 12);
                    const auto y0 = random_values<float>(static_cast<std::size_t>(rows * ldy), 13);
                    auto dx = upload(x), dy = upload(y0);
                    gw.apply(dx.data(), ldx, rows, dy.data(), ldy, 0.75f, accumulate);
                    const auto got = download(dy);
                    std::vector<float> want = y0;
                    hw.apply(x.data(), ldx, rows, want.data(), ldy, 0.75f, accumulate);
                    CHECK(max_rel_error(got, std::vector<double>(want.begin(), want.end())) < 2e-6);
                    // Nothing outside the rows' first `out` columns is written.
                    bool untouched = true;
                    for (index_t r = 0; r < rows; ++r)
                        for (index_t c = out; c < ldy; ++c)
                            untouched = untouched &&
                                std::bit_cast<std::uint32_t>(got[r * ldy + c]) == std::bit_cast<std::uint32_t>(y0[r * ldy + c]);
                    CHECK(untouched);
                }
}

// A channel block or row slice boundary inside one call: the LM-head-sized product is sliced by
// linear_scratch_bytes (32 MB), so 40000 × 512 int8 weights times 9 rows take two widened blocks.
TEST_CASE("cuda linear: products larger than one scratch slice equal the CPU kernel") {
    using locost::ops::weight_precision;
    const index_t out = 40000, in = 512, rows = 9;
    const auto wv = random_values<float>(static_cast<std::size_t>(out * in), 21);
    locost::tensor<float> w({out, in});
    std::copy(wv.begin(), wv.end(), w.data());
    const auto x = random_values<float>(static_cast<std::size_t>(rows * in), 22);
    for (const weight_precision p : {weight_precision::bf16, weight_precision::i8}) {
        CAPTURE(static_cast<int>(p));
        const locost::layers::weight_matrix<float, cuda> gw(w, p);
        const locost::layers::weight_matrix<float, locost::cpu> hw(w, p);
        auto dx = upload(x);
        locost::tensor<float, cuda> dy({rows * out});
        gw.apply(dx.data(), dy.data(), rows);
        std::vector<float> want(static_cast<std::size_t>(rows * out));
        hw.apply(x.data(), want.data(), rows);
        CHECK(max_rel_error(download(dy), std::vector<double>(want.begin(), want.end())) < 2e-6);
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

// A tensor in static storage, made on this thread's default context, is freed during the process's
// exit, after the thread-locals (that context among them) are gone: the free must not reach for the
// deleted context. On an H200 it did (it synchronized a destroyed stream) and the benchmark holding
// its model in a static crashed at exit. What checks it is this program's exit status: the emulator
// stops the program on a call naming a destroyed stream, and a GPU may crash there.
TEST_CASE("cuda memory: a tensor in static storage is freed at exit, after the thread's context is gone") {
    static locost::tensor<float, cuda> kept = [] {
        locost::tensor<float> h({1000});
        std::fill(h.data(), h.data() + h.numel(), 1.5f);
        return locost::to_device(h);
    }();
    CHECK(locost::to_host(kept).data()[999] == 1.5f);
}

TEST_CASE("cuda caching allocator: a freed block is reused by its stream, held until released, and freed across threads safely") {
    namespace cd = locost::cuda_detail;
    cd::release_cached_memory();
    const auto start = cd::memory_stats();
    const float* first = nullptr;
    {
        locost::tensor<float, cuda> a({1 << 20});
        first = a.data();
    }
    const auto kept = cd::memory_stats();
    CHECK(kept.current == start.current);
    CHECK(kept.cached >= (std::size_t{4} << 20));  // kept, not given back
    {
        locost::tensor<float, cuda> b({(1 << 20) - 100});  // the same class: the same block
        CHECK(b.data() == first);
        CHECK(cd::memory_stats().cached == kept.cached - (std::size_t{4} << 20));
    }
    // Made on another thread's stream, whose context ends with the thread, and freed here: the block
    // goes back to the driver, not to a list a new stream at the same address would take from.
    std::unique_ptr<locost::tensor<float, cuda>> moved;
    std::thread([&] { moved = std::make_unique<locost::tensor<float, cuda>>(locost::to_device(locost::tensor<float>({1000}))); }).join();
    const auto before_free = cd::memory_stats();
    moved.reset();
    CHECK(cd::memory_stats().cached == before_free.cached);
    CHECK(cd::memory_stats().reserved == before_free.reserved - 4096);
    cd::release_cached_memory();
    CHECK(cd::memory_stats().cached == 0);
    CHECK(cd::memory_stats().reserved == cd::memory_stats().current);
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

}  // namespace

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
                    locost::transfer<cuda>::copy(out, dk.data() + h0 * channels * len,
                                                 static_cast<std::size_t>((h1 - h0) * channels * len));
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
    auto gpu = locost::models::load_encoder<T, cuda>(ck);
    auto host = locost::models::load_encoder<T, locost::cpu>(ck);
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

// ---- copies, cache stores and attention: the GPU against the CPU kernels on the same data -------

namespace {

template <class T>
std::vector<T> download_n(const T* device, std::size_t n) {
    std::vector<T> v(n);
    locost::transfer<cuda>::download(v.data(), device, n);
    return v;
}

}  // namespace

TEST_CASE_TEMPLATE("cuda strided_copy and fill: the CPU kernel's result, and nothing else written", T, float, double) {
    // Four levels: rows of `width` in three nested strides, read in a permuted order (src is
    // (n1, n0, n2, width) densely) and written with gaps between rows and blocks.
    locost::ops::copy_layout l;
    l.n0 = 3, l.n1 = 4, l.n2 = 5, l.width = 7;
    l.dst2 = l.width + 2, l.dst1 = l.n2 * l.dst2 + 3, l.dst0 = l.n1 * l.dst1 + 1;
    l.src2 = l.width, l.src0 = l.n2 * l.width, l.src1 = l.n0 * l.n2 * l.width;
    const auto src = random_values<T>(static_cast<std::size_t>(l.n1 * l.src1), 31);
    std::vector<T> dst(static_cast<std::size_t>(l.n0 * l.dst0 + 11), T(-7));
    auto dsrc = upload(src), ddst = upload(dst);
    locost::ops::strided_copy<cuda>(ddst.data(), static_cast<const T*>(dsrc.data()), l);
    locost::ops::strided_copy<locost::cpu>(dst.data(), src.data(), l);
    CHECK(download(ddst) == dst);

    std::vector<T> x(10010, T(5));
    auto dx = upload(x);
    locost::ops::fill<cuda>(dx.data(), 10001, T(3.25));
    locost::ops::fill<locost::cpu>(x.data(), 10001, T(3.25));
    CHECK(download(dx) == x);
}

TEST_CASE_TEMPLATE("cuda store_rows: the CPU kernel's bytes for float32, bfloat16 and int8", T, float, double) {
    const index_t rows = 37, n = 300, ldx = 310;
    auto x = random_values<T>(static_cast<std::size_t>(rows * ldx), 32, -3, 3);
    for (index_t c = 0; c < n; ++c) x[static_cast<std::size_t>(4 * ldx + c)] = T(0);  // an all-zero row: int8 scale 1
    // bfloat16 ties (round to even, both ways), a carry into the exponent, overflow to inf.
    const float special[] = {std::bit_cast<float>(0x3f808000u), std::bit_cast<float>(0x3f818000u),  std::bit_cast<float>(0x3f7fffffu),
                             std::bit_cast<float>(0x7f7fffffu), -std::bit_cast<float>(0x3f808000u), 1e-40f};
    for (std::size_t s = 0; s < std::size(special); ++s) x[static_cast<std::size_t>(7 * ldx) + s] = static_cast<T>(special[s]);
    if constexpr (std::is_same_v<T, float>) {
        // NaNs keep sign and high payload, quieted (dtype.hpp's float_to_bf16); float only, as a
        // double NaN's narrowing is the hardware's choice.
        x[static_cast<std::size_t>(8 * ldx)] = std::bit_cast<float>(0x7f800001u);
        x[static_cast<std::size_t>(8 * ldx + 1)] = std::bit_cast<float>(0xffc12345u);
    }
    auto dx = upload(x);
    using locost::ops::kv_precision;
    for (kv_precision p : {kv_precision::f32, kv_precision::bf16, kv_precision::i8}) {
        CAPTURE(static_cast<int>(p));
        const std::size_t width = p == kv_precision::f32 ? 4 : p == kv_precision::bf16 ? 2 : 1;
        const std::size_t bytes = static_cast<std::size_t>(rows * n) * width;
        // int8 rows other than the NaN row (lrint of NaN is unspecified on the host)
        std::vector<T> xs = x;
        if (p == kv_precision::i8)
            for (index_t c = 0; c < 2; ++c) xs[static_cast<std::size_t>(8 * ldx + c)] = T(1);
        auto dxs = upload(xs);
        std::vector<std::byte> want(bytes);
        std::vector<float> want_scale(static_cast<std::size_t>(rows), -1.0f);
        locost::ops::store_rows<locost::cpu>(p, xs.data(), ldx, rows, n, want.data(), want_scale.data());
        locost::tensor<std::byte, cuda> out({static_cast<index_t>(bytes)});
        locost::tensor<float, cuda> scale({rows});
        locost::ops::fill<cuda>(scale.data(), rows, -1.0f);
        locost::ops::store_rows<cuda>(p, static_cast<const T*>(dxs.data()), ldx, rows, n, static_cast<void*>(out.data()), scale.data());
        CHECK(download_n(static_cast<const std::byte*>(out.data()), bytes) == want);
        CHECK(download_n(static_cast<const float*>(scale.data()), static_cast<std::size_t>(rows)) == want_scale);
        if (p == kv_precision::i8) CHECK(want_scale[4] == 1.0f);
    }
}

namespace {

using locost::ops::kv_precision;

// One stored K/V matrix (rows × d, row stride ld) in host memory and on the device, with its
// values as double for the reference: native rows are T (the reference reads a double copy),
// the stored precisions are written by the CPU's store_rows and read as the same bytes by both.
template <class T>
struct stored_kv {
    kv_precision precision = kv_precision::native;
    index_t rows = 0, ld = 0;
    std::vector<std::byte> bytes;  // f32, bf16, i8
    std::vector<float> scale;      // i8
    std::vector<double> native;    // native, widened for the reference
    locost::tensor<std::byte, cuda> dbytes;
    locost::tensor<float, cuda> dscale;

    stored_kv(kv_precision p, index_t n, index_t d, unsigned seed) : precision(p), rows(n) {
        const auto x = random_values<T>(static_cast<std::size_t>(std::max<index_t>(n, 1) * d), seed);
        if (p == kv_precision::native) {
            ld = d + 3;  // a row stride wider than d
            std::vector<T> rowsT(static_cast<std::size_t>(std::max<index_t>(n, 1) * ld), T(0));
            native.assign(rowsT.size(), 0.0);
            for (index_t r = 0; r < n; ++r)
                for (index_t c = 0; c < d; ++c) {
                    rowsT[static_cast<std::size_t>(r * ld + c)] = x[static_cast<std::size_t>(r * d + c)];
                    native[static_cast<std::size_t>(r * ld + c)] = static_cast<double>(x[static_cast<std::size_t>(r * d + c)]);
                }
            bytes.resize(rowsT.size() * sizeof(T));
            std::memcpy(bytes.data(), rowsT.data(), bytes.size());
        } else {
            ld = d;
            const std::size_t width = p == kv_precision::f32 ? 4 : p == kv_precision::bf16 ? 2 : 1;
            bytes.resize(static_cast<std::size_t>(std::max<index_t>(n, 1) * d) * width);
            scale.assign(static_cast<std::size_t>(std::max<index_t>(n, 1)), 1.0f);
            if (n > 0) locost::ops::store_rows<locost::cpu>(p, x.data(), d, n, d, bytes.data(), scale.data());
        }
        dbytes = locost::tensor<std::byte, cuda>({static_cast<index_t>(bytes.size())});
        locost::transfer<cuda>::upload(dbytes.data(), bytes.data(), bytes.size());
        if (p == kv_precision::i8) {
            dscale = locost::tensor<float, cuda>({static_cast<index_t>(scale.size())});
            locost::transfer<cuda>::upload(dscale.data(), scale.data(), scale.size());
        }
    }
    locost::ops::kv_matrix device() const {
        return {precision, dbytes.data(), precision == kv_precision::i8 ? dscale.data() : nullptr, ld};
    }
    locost::ops::kv_matrix host() const {
        if (precision == kv_precision::native) return {precision, native.data(), nullptr, ld};
        return {precision, bytes.data(), precision == kv_precision::i8 ? scale.data() : nullptr, ld};
    }
};

// A host vector of T, its double twin for the reference, and a device copy.
template <class T>
struct values {
    std::vector<T> h;
    std::vector<double> ref;
    locost::tensor<T, cuda> d;
    explicit values(std::vector<T> v) : h(std::move(v)), ref(h.begin(), h.end()), d(upload(h)) {}
};

// max |got − ref| / max |ref| over an (nq, d) block with row strides ldg and ldr.
template <class T>
double block_rel_error(const T* got, index_t ldg, const double* ref, index_t ldr, index_t nq, index_t d) {
    double diff = 0, scale = 0;
    for (index_t i = 0; i < nq; ++i)
        for (index_t c = 0; c < d; ++c) {
            diff = std::max(diff, std::abs(static_cast<double>(got[i * ldg + c]) - ref[i * ldr + c]));
            scale = std::max(scale, std::abs(ref[i * ldr + c]));
        }
    return scale > 0 ? diff / scale : diff;
}

enum class bias_kind { none, dense, one_row, band };
struct attention_shape {
    index_t nq, nk, nk2;
    bias_kind bias;
    bool key_bias, bias2, masked_row;  // masked_row: row 5 sees only −inf (needs nq > 5)
};

// One ops::attention call: the problems of `shapes` (first segment stored in prec, second in prec2,
// row width d) solved on the GPU in T and by the CPU kernel in double on the same stored keys and
// values (so the float GPU result is held to float's accuracy, not to the sum of two float
// kernels' errors). Checks every output within tolerance, the padding beside each output row
// untouched, masked rows and problems without keys zero. Returns the plan attention.cu chose.
template <class T>
std::string check_attention_call(const std::vector<attention_shape>& shapes, index_t d, kv_precision prec, kv_precision prec2,
                                 unsigned seed) {
    const T inf = std::numeric_limits<T>::infinity();
    struct problem_data {
        attention_shape s;
        index_t ldq, ldo;
        std::unique_ptr<values<T>> q, bias, bias2, key_bias;
        std::unique_ptr<stored_kv<T>> k, v, k2, v2;
        locost::tensor<T, cuda> out;
        std::vector<double> ref;
        index_t bias_offset = 0;  // band: entry j − i is at bias[bias_offset + j − i]
    };
    std::vector<problem_data> data(shapes.size());
    std::vector<locost::ops::attention_problem<T>> gpu;
    std::vector<locost::ops::attention_problem<double>> cpu;
    for (std::size_t n = 0; n < shapes.size(); ++n) {
        const attention_shape& s = shapes[n];
        problem_data& pd = data[n];
        pd.s = s;
        pd.ldq = d + 2, pd.ldo = d + 4;
        pd.q = std::make_unique<values<T>>(random_values<T>(static_cast<std::size_t>(s.nq * pd.ldq), ++seed, -0.25, 0.25));
        pd.k = std::make_unique<stored_kv<T>>(prec, s.nk, d, ++seed);
        pd.v = std::make_unique<stored_kv<T>>(prec, s.nk, d, ++seed);
        pd.k2 = std::make_unique<stored_kv<T>>(prec2, s.nk2, d, ++seed);
        pd.v2 = std::make_unique<stored_kv<T>>(prec2, s.nk2, d, ++seed);
        std::vector<T> out0(static_cast<std::size_t>(s.nq * pd.ldo), T(7));  // the padding must stay 7
        pd.out = upload(out0);
        pd.ref.assign(out0.size(), 7.0);
        locost::ops::attention_problem<T> g;
        locost::ops::attention_problem<double> c;
        g.nq = c.nq = s.nq, g.ldq = c.ldq = pd.ldq, g.nk = c.nk = s.nk, g.nk2 = c.nk2 = s.nk2, g.ldo = c.ldo = pd.ldo;
        g.q = pd.q->d.data(), c.q = pd.q->ref.data();
        g.k = pd.k->device(), g.v = pd.v->device(), g.k2 = pd.k2->device(), g.v2 = pd.v2->device();
        c.k = pd.k->host(), c.v = pd.v->host(), c.k2 = pd.k2->host(), c.v2 = pd.v2->host();
        g.out = pd.out.data(), c.out = pd.ref.data();
        const bool masked_row = s.masked_row && s.nq > 5;
        if (s.bias != bias_kind::none) {
            std::vector<T> b;
            if (s.bias == bias_kind::dense) {
                b = random_values<T>(static_cast<std::size_t>(s.nq * s.nk), ++seed);
                g.ldb = c.ldb = locost::ops::dense_bias;
                if (masked_row)
                    for (index_t j = 0; j < s.nk; ++j) b[static_cast<std::size_t>(5 * s.nk + j)] = -inf;
                for (index_t j = 0; j < s.nk; j += 3) b[static_cast<std::size_t>(j)] = -inf;  // masks in row 0
            } else if (s.bias == bias_kind::one_row) {
                b = random_values<T>(static_cast<std::size_t>(s.nk), ++seed);
                g.ldb = c.ldb = 0;
                for (index_t j = 1; j < s.nk; j += 4) b[static_cast<std::size_t>(j)] = -inf;
            } else {
                // entries j − i from −(nq − 1) to nk − 1; every odd positive offset masked
                b = random_values<T>(static_cast<std::size_t>(s.nq - 1 + s.nk), ++seed);
                pd.bias_offset = s.nq - 1;
                for (index_t t = 1; t < s.nk; t += 2) b[static_cast<std::size_t>(pd.bias_offset + t)] = -inf;
                g.ldb = c.ldb = -1;
            }
            pd.bias = std::make_unique<values<T>>(std::move(b));
            g.bias = pd.bias->d.data() + pd.bias_offset, c.bias = pd.bias->ref.data() + pd.bias_offset;
        }
        if (s.key_bias) {
            auto kb = random_values<T>(static_cast<std::size_t>(s.nk), ++seed, -1, 1);
            for (index_t j = 2; j < s.nk; j += 5) kb[static_cast<std::size_t>(j)] = -inf;
            pd.key_bias = std::make_unique<values<T>>(std::move(kb));
            g.key_bias = pd.key_bias->d.data(), c.key_bias = pd.key_bias->ref.data();
        }
        if (s.bias2) {
            auto b2 = random_values<T>(static_cast<std::size_t>(s.nq * s.nk2), ++seed);
            if (masked_row)
                for (index_t j = 0; j < s.nk2; ++j) b2[static_cast<std::size_t>(5 * s.nk2 + j)] = -inf;
            pd.bias2 = std::make_unique<values<T>>(std::move(b2));
            g.bias2 = pd.bias2->d.data(), c.bias2 = pd.bias2->ref.data();
            g.ldb2 = c.ldb2 = locost::ops::dense_bias;
        }
        gpu.push_back(g);
        cpu.push_back(c);
    }
    const std::string plan = locost::cuda_detail::attention_plan(gpu, d);
    CAPTURE(plan);
    locost::ops::attention<cuda>(gpu, d);
    locost::ops::attention<locost::cpu>(cpu, d);
    for (std::size_t n = 0; n < shapes.size(); ++n) {
        const problem_data& pd = data[n];
        CAPTURE(n);
        const auto got = download(pd.out);
        CHECK(block_rel_error(got.data(), pd.ldo, pd.ref.data(), pd.ldo, pd.s.nq, d) < tolerance<T>());
        bool padding = true;
        for (index_t i = 0; i < pd.s.nq; ++i)
            for (index_t c = d; c < pd.ldo; ++c) padding = padding && got[static_cast<std::size_t>(i * pd.ldo + c)] == T(7);
        CHECK(padding);
        if (pd.s.masked_row && pd.s.nq > 5)
            for (index_t c = 0; c < d; ++c) CHECK(got[static_cast<std::size_t>(5 * pd.ldo + c)] == T(0));
        if (pd.s.nk + pd.s.nk2 == 0)
            for (index_t i = 0; i < pd.s.nq; ++i)
                for (index_t c = 0; c < d; ++c) CHECK(got[static_cast<std::size_t>(i * pd.ldo + c)] == T(0));
    }
    return plan;
}

// Sets the attention chunk length for a scope (0: chosen from the work).
struct attention_chunk_scope {
    explicit attention_chunk_scope(index_t keys) { locost::cuda_detail::set_attention_chunk(keys); }
    ~attention_chunk_scope() { locost::cuda_detail::set_attention_chunk(0); }
};

const std::vector<kv_precision> all_precisions = {kv_precision::native, kv_precision::f32, kv_precision::bf16, kv_precision::i8};

}  // namespace

// Many query rows (an encoder's self-attention, chunks of SLED): four rows a warp.
TEST_CASE_TEMPLATE("cuda attention: mixed problems, every bias layout, two segments, each cache precision, against the CPU", T, float,
                   double) {
    const std::vector<attention_shape> shapes = {
        {1, 1, 0, bias_kind::none, false, false, false},  // one key
        {37, 100, 0, bias_kind::dense, false, false, false},
        {37, 100, 0, bias_kind::one_row, true, false, false},  // ldb 0, padding mask
        {37, 5000, 0, bias_kind::band, true, false, false},    // Toeplitz band, split over chunks
        {37, 100, 24, bias_kind::dense, true, true, true},     // second segment; row 5 masked everywhere
        {1, 200000, 16, bias_kind::none, true, true, false},   // a long decoding row, split
        {1, 5000, 0, bias_kind::band, false, false, false},
        {37, 1, 50, bias_kind::none, false, true, false},    // second segment, ldb2 dense
        {3, 0, 20, bias_kind::none, false, true, false},     // only the second segment
        {2, 0, 0, bias_kind::none, false, false, false},     // no keys: zeros
        {37, 5000, 7, bias_kind::dense, false, true, true},  // a masked row over a split range
        {6, 300, 600, bias_kind::dense, true, true, true},   // chunks that start inside the second segment
    };
    for (std::size_t pi = 0; pi < all_precisions.size(); ++pi) {
        CAPTURE(static_cast<int>(all_precisions[pi]));
        const std::string plan = check_attention_call<T>(shapes, 64, all_precisions[pi], all_precisions[(pi + 1) % all_precisions.size()],
                                                         100 + static_cast<unsigned>(pi) * 50);
        // 12 problems: descriptors in device memory; double goes one row a warp
        CHECK(plan.rfind(std::is_same_v<T, float> ? "attend_chunks NQ=4 LK=8 NB=1 any rows, 12 tasks in parameters"
                                                  : "attend_chunks NQ=1 LK=8 NB=1 any rows, 12 tasks in parameters",
                         0) == 0);
    }
}

// A decoding step's calls (layers/kv_cache.hpp): one row per problem (greedy: one per head; a
// batch: one per document and head) or a few (beam hypotheses of one document), over many keys:
// every row width attention.cu's table tells apart (32 … 768, 100 not a multiple of the 8-column
// runs), each cache precision and both ways of reading rows (native rows here have a stride of
// d + 3: no vector loads), each bias layout, both segments, the chosen chunking and short chunks
// (rows cut into more chunks than a merge block has threads), and more problems than the launch's
// parameters carry.
TEST_CASE_TEMPLATE("cuda attention: a decoding step's few rows over many keys, every row width, precision and chunking", T, float, double) {
#if defined(LOCOST_CUDA_EMULATED_TESTS)
    constexpr bool emulated = true;  // (fewer keys: the host emulation is slow)
#else
    constexpr bool emulated = false;
#endif
    for (index_t d : {64, 32, 100, 128, 256, 768}) {
        for (index_t rows : {1, 4}) {
            const index_t nk = emulated ? 600 : 5000;
            const std::vector<attention_shape> shapes = {
                {rows, nk, 0, bias_kind::none, true, false, false},
                {rows, 1, 0, bias_kind::none, false, false, false},
                {rows, 700, 5, bias_kind::dense, false, true, false},
                {rows, nk, 0, bias_kind::band, false, false, false},
                {std::max<index_t>(1, rows - 1), 300, 0, bias_kind::one_row, true, false, false},
                {rows, 0, 0, bias_kind::none, false, false, false},
            };
            // Both segments in one precision (the stored readers, when aligned), and mixed (the
            // generic one); the chosen chunking and chunks of 7 keys.
            for (std::size_t pi = 0; pi < all_precisions.size(); ++pi)
                for (const auto& [uniform, chunk] : {std::pair{true, index_t{0}}, {true, index_t{7}}, {false, index_t{0}}}) {
                    const kv_precision prec = all_precisions[pi], prec2 = uniform ? prec : all_precisions[(pi + 1) % all_precisions.size()];
                    CAPTURE(d);
                    CAPTURE(rows);
                    CAPTURE(static_cast<int>(prec));
                    CAPTURE(uniform);
                    CAPTURE(chunk);
                    const attention_chunk_scope scope(chunk);
                    const std::string plan = check_attention_call<T>(shapes, d, prec, prec2, 500 + static_cast<unsigned>(d + pi));
                    const int lk = d <= 64 ? 8 : d <= 128 ? 16 : 32, nb = d <= 256 ? 1 : static_cast<int>((d + 255) / 256);
                    const int nq = rows == 1 || !std::is_same_v<T, float> ? 1 : nb == 1 ? 4 : 2;
                    // native rows here have an odd stride, and d = 100 no 8-column runs: read per row
                    const bool stored = uniform && prec != kv_precision::native && d % 8 == 0 && std::is_same_v<T, float>;
                    const std::string storage = !stored ? "any"
                        : prec == kv_precision::f32     ? "float32"
                        : prec == kv_precision::bf16    ? "bfloat16"
                                                        : "int8";
                    CHECK(plan.rfind("attend_chunks NQ=" + std::to_string(nq) + " LK=" + std::to_string(lk) + " NB=" + std::to_string(nb) +
                                         " " + storage + " rows, 6 tasks in parameters",
                                     0) == 0);
                    if (chunk) CHECK(plan.find("chunk 7,") != std::string::npos);
                }
        }
    }
    // 20 problems: more than the parameters carry, so the descriptors go to device memory.
    std::vector<attention_shape> many(20, attention_shape{1, 333, 0, bias_kind::none, true, false, false});
    const std::string plan = check_attention_call<T>(many, 64, kv_precision::bf16, kv_precision::i8, 900);
    CHECK(plan.find("20 tasks in device memory") != std::string::npos);
}

TEST_CASE_TEMPLATE("cuda shared_kv_attention: 48 queries over 1, 3000 and 300000 states, each precision, against the CPU", T, float,
                   double) {
    const index_t nq = 48, d = 512, ldq = d + 8, ldo = d + 16;
    const values<T> q(random_values<T>(static_cast<std::size_t>(nq * ldq), 41, -0.1, 0.1));
#if defined(LOCOST_CUDA_EMULATED_TESTS)
    // On the host emulator 300000 states take minutes; 3000 already cut each row into 24 chunks
    // that the merge kernel combines.
    const index_t state_counts[] = {1, 3000};
#else
    const index_t state_counts[] = {1, 3000, 300000};
#endif
    for (kv_precision prec : {kv_precision::native, kv_precision::f32, kv_precision::bf16, kv_precision::i8})
        for (index_t nk : state_counts) {
            CAPTURE(static_cast<int>(prec));
            CAPTURE(nk);
            const stored_kv<T> states(prec, nk, d, 42 + static_cast<unsigned>(nk));
            auto out = upload(std::vector<T>(static_cast<std::size_t>(nq * ldo), T(7)));
            std::vector<double> ref(static_cast<std::size_t>(nq * ldo), 7.0);
            locost::ops::shared_kv_attention<cuda, T>(q.d.data(), nq, ldq, states.device(), nk, d, out.data(), ldo);
            locost::ops::shared_kv_attention<locost::cpu, double>(q.ref.data(), nq, ldq, states.host(), nk, d, ref.data(), ldo);
            const auto got = download(out);
            CHECK(block_rel_error(got.data(), ldo, ref.data(), ldo, nq, d) < tolerance<T>());
            bool padding = true;
            for (index_t i = 0; i < nq; ++i)
                for (index_t c = d; c < ldo; ++c) padding = padding && got[static_cast<std::size_t>(i * ldo + c)] == T(7);
            CHECK(padding);
        }
}

TEST_CASE_TEMPLATE("cuda gather_sum: segments of 0, 1 and many rows equal the CPU kernel bit for bit", T, float, double) {
    const index_t rows = 500, n = 77, ldx = 80, ldo = 90;
    const auto x = random_values<T>(static_cast<std::size_t>(rows * ldx), 31);
    std::vector<std::int64_t> offsets = {0}, at;
    std::mt19937 g(32);
    for (index_t s = 0; s < 40; ++s) {
        const index_t count = s % 7 == 0 ? 0 : s % 3 == 0 ? 1 : static_cast<index_t>(g() % 30);
        for (index_t k = 0; k < count; ++k) at.push_back(static_cast<std::int64_t>(g() % rows));
        offsets.push_back(static_cast<std::int64_t>(at.size()));
    }
    const index_t S = static_cast<index_t>(offsets.size()) - 1;
    std::vector<T> want(static_cast<std::size_t>(S * ldo), T(5));
    locost::ops::gather_sum<locost::cpu>(x.data(), ldx, n, offsets.data(), at.data(), S, want.data(), ldo);
    auto dx = upload(x), dout = upload(std::vector<T>(want.size(), T(5)));
    auto doff = upload(offsets), dat = upload(at);
    locost::ops::gather_sum<cuda>(static_cast<const T*>(dx.data()), ldx, n, doff.data(), dat.data(), S, dout.data(), ldo);
    CHECK(download(dout) == want);  // the padding between output rows untouched too
}

// ---- whole models on the GPU ------------------------------------------------------------
// The host-side orchestration of these runs is checked without a GPU on the emulated device
// (tests/device/test_device.cpp, tests/models/test_hf_parity.cpp); here the CUDA kernels do the arithmetic.

namespace {

template <class Backend>
locost::models::any_model<float, Backend> model_on(const std::string& dir, locost::models::model_options o = {}) {
    return locost::models::load_model<float, Backend>(locost::io::checkpoint::open(dir), o);
}

}  // namespace

TEST_CASE("cuda LOCOST model: greedy steps equal the original's and the CPU backend's, every cross-attention form") {
    using namespace test;
    const reference dec(reference_dir + "/locost_decoder.safetensors");
    const auto want = dec.floats("greedy.step_logits");
    const index_t steps = dec.shape("greedy.step_logits")[0];
    const auto ids = dec.ints("greedy.enc_input_ids");
    using locost::models::cross_attention_form;
    using locost::models::cross_cache_precision;
    for (auto cache : {cross_cache_precision::automatic, cross_cache_precision::bf16, cross_cache_precision::i8})
        for (auto form : {cross_attention_form::cached, cross_attention_form::folded}) {
            CAPTURE(static_cast<int>(cache));
            CAPTURE(static_cast<int>(form));
            locost::models::model_options o;
            o.cross_cache = cache;
            o.cross_attention = form;
            auto gpu = model_on<cuda>(tiny_dir, o);
            auto host = model_on<locost::cpu>(tiny_dir, o);
            std::vector<std::int64_t> sg, sh;
            const auto lg = greedy_step_logits(gpu, ids, steps, sg), lh = greedy_step_logits(host, ids, steps, sh);
            CHECK(sg == sh);
            // A bfloat16 or int8 cache stores values that differ by float rounding between the
            // backends, and the odd one rounds to the neighbouring stored value: one bfloat16 ulp
            // is 2^-8 of the value. Measured on the emulator, bf16 folded: 2.0e-5 (the cache's own
            // effect against float32: 5e-4). The double runs below show the kernels themselves agree.
            const double between = cache == cross_cache_precision::automatic ? 1e-5 : 5e-5;
            CHECK(rel_error(lg.data(), std::vector<float>(lh.begin(), lh.end())) < between);
            if (cache == cross_cache_precision::automatic) CHECK(rel_error(lg.data(), want) < parity);
            // In double the backends' inputs to the storage rounding agree to ~1e-16, so no value
            // rounds differently and the logits agree to double precision in every form.
            auto gd = locost::models::load_model<double, cuda>(locost::io::checkpoint::open(tiny_dir), o);
            auto hd = locost::models::load_model<double, locost::cpu>(locost::io::checkpoint::open(tiny_dir), o);
            std::vector<std::int64_t> sgd, shd;
            const auto ld = greedy_step_logits(gd, ids, steps, sgd), lhd = greedy_step_logits(hd, ids, steps, shd);
            CHECK(sgd == shd);
            CHECK(max_rel_error(ld, std::vector<double>(lhd.begin(), lhd.end())) < 1e-12);
        }
    // Reduced-precision decoder weights (a step's few-row products read bfloat16 or int8 weights)
    // and encoder products (bfloat16 or int8 inputs for the encoder's and the cache's large
    // products). Weights are rounded once, on the host, for both backends: with float32 products
    // the logits differ by float32 summation order alone. Rounding a product's inputs is not
    // continuous: an element that float32 order leaves a hair apart on the two backends can round
    // to neighbouring bfloat16 values (2^-8 apart) or int8 steps, and that one element moves its
    // row's outputs by ~1e-3 (measured, LOCOST tiny at 100 tokens, compute bf16: encoder states
    // 8.7e-4 apart, logits 3.3e-4; at 64 or 128 tokens no element flips and they agree to 2e-7).
    // So there the test asks for the same greedy ids, agreement within a few such flips, and an
    // error against float32 computation no larger than the CPU's.
    {
        using locost::models::compute_precision;
        using locost::ops::weight_precision;
        auto exact = model_on<locost::cpu>(tiny_dir);
        std::vector<std::int64_t> se;
        const auto le = greedy_step_logits(exact, ids, steps, se);
        const std::pair<weight_precision, compute_precision> settings[] = {{weight_precision::bf16, compute_precision::f32},
                                                                           {weight_precision::i8, compute_precision::f32},
                                                                           {weight_precision::native, compute_precision::bf16},
                                                                           {weight_precision::i8, compute_precision::i8}};
        for (const auto& [wp, cp] : settings) {
            CAPTURE(static_cast<int>(wp));
            CAPTURE(static_cast<int>(cp));
            locost::models::model_options o;
            o.weights = wp;
            o.encoder.compute = cp;
            auto gpu = model_on<cuda>(tiny_dir, o);
            auto host = model_on<locost::cpu>(tiny_dir, o);
            std::vector<std::int64_t> sg, sh;
            const auto lg = greedy_step_logits(gpu, ids, steps, sg), lh = greedy_step_logits(host, ids, steps, sh);
            CHECK(sg == sh);
            const double between = rel_error(lg.data(), std::vector<float>(lh.begin(), lh.end()));
            // Against float32 at the first step only, the one whose input (the start token) every
            // precision shares; later steps follow each precision's own greedy choices.
            const std::vector<float> lef(le.begin(), le.begin() + gpu.config().vocab_size);
            const double gpu_error = rel_error(lg.data(), lef), cpu_error = rel_error(lh.data(), lef);
            MESSAGE("weights " << std::string(locost::models::weights_name(wp)) << ", compute "
                               << std::string(locost::models::compute_name(cp))
                               << ": max |CUDA - CPU| / max |CPU| over the greedy steps' logits = " << between
                               << "; first step against float32 computation: CUDA " << gpu_error << ", CPU " << cpu_error);
            if (cp == compute_precision::f32) CHECK(between < 1e-5);
            else CHECK(between < 2e-3);
            CHECK(gpu_error < 1.5 * cpu_error + 1e-5);
        }
    }
    // Beam search reorders the caches on the device.
    auto gpu = model_on<cuda>(tiny_dir);
    auto host = model_on<locost::cpu>(tiny_dir);
    auto o = locost::generation::default_generation_options(gpu.config());
    o.num_beams = 3;
    o.num_return_sequences = 2;
    o.max_new_tokens = 6;
    const locost::generation::token_rows rows = {std::vector<std::int64_t>(ids.begin(), ids.end())};
    const auto rg = locost::generation::generate(gpu, gpu.encode(ids.data(), nullptr, 1, static_cast<index_t>(ids.size())), rows, o);
    const auto rh = locost::generation::generate(host, host.encode(ids.data(), nullptr, 1, static_cast<index_t>(ids.size())), rows, o);
    CHECK(rg.sequences == rh.sequences);
}

TEST_CASE("cuda Hugging Face families and SLED: teacher-forced logits equal transformers 5.17 (T5, BART, LongT5, LED, Pegasus-X)") {
    using namespace test;
    const std::string hf = data_dir + "/hf";
    struct hf_case {
        const char* name;
        const char* checkpoint;
        index_t prefix;
        std::vector<index_t> globals;
    };
    const hf_case cases[] = {
        {"t5_v11", "t5_v11", -1, {0}},        {"sled_t5_p6", "t5_v11", 6, {0}},          {"bart", "bart", -1, {0}},
        {"sled_bart_p6", "bart", 6, {0}},     {"longt5_local", "longt5_local", -1, {0}}, {"longt5_tglobal", "longt5_tglobal", -1, {0}},
        {"led_g1", "led_g0", -1, {0, 5, 50}}, {"pegasus_x", "pegasus_x", -1, {0}}};
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        locost::models::model_options o;
        o.encoder.global_tokens = c.globals;
        if (c.prefix >= 0) o.sled = locost::models::sled_options{32, 0.5, c.prefix, true, true, 0};
        auto m = model_on<cuda>(hf + "/" + c.checkpoint, o);
        const reference ref(hf + "/" + c.name + "/reference.safetensors");
        const auto ids = ref.ints("enc.input_ids");
        const auto m01 = ref.ints("enc.attention_mask");
        const std::vector<float> mask(m01.begin(), m01.end());
        const auto d = ref.ints("dec.decoder_input_ids");
        const auto logits = m.score(ids.data(), mask.data(), ref.shape("enc.input_ids")[0], ref.shape("enc.input_ids")[1], d.data(),
                                    ref.shape("dec.decoder_input_ids")[1]);
        CHECK(rel_error(logits.data(), ref.floats("dec.logits")) < parity);
    }
}

#if defined(LOCOST_CUDA_EMULATED_TESTS)
// What crosses between host and device in a decoding step, counted by the emulated runtime
// (tests/cuda_emulator/traffic.hpp): the calls a GPU gets for the same program. Issue 13: "encoder
// states and the cross-attention cache never leave the device; only token ids cross per decoding
// step". Per greedy step, after two steps that fill the allocator's lists: in go the token ids
// (every family's positions are computed on the device from the step; the attention calls' problem
// descriptors travel in their launches' parameters); out comes the logits row; the host waits once
// per id upload (backend/cuda/runtime.cu: an upload waits for its stream, which is idle then) and
// once for the logits; no cudaMalloc or cudaFree reaches the driver. Nothing grows with the
// document or the decoded length.
TEST_CASE("cuda decoding traffic (emulated runtime): per greedy step, ids in, one logits row out, no driver allocation") {
    using namespace test;
    const std::string hf = data_dir + "/hf";
    const std::pair<std::string, std::uint64_t> cases[] = {{tiny_dir, 1}, {hf + "/t5_v11", 1}, {hf + "/bart", 1}, {hf + "/pegasus_x", 1}};
    for (const auto& [dir, id_uploads] : cases) {
        CAPTURE(dir);
        auto m = model_on<cuda>(dir);
        const index_t V = m.config().vocab_size, steps = 8, warm = 2;
        const auto ids = test::spread_ids(64, V);
        auto e = m.encode(ids.data(), nullptr, 1, static_cast<index_t>(ids.size()));
        auto st = m.start(e, 1, steps);
        std::vector<float> logits(static_cast<std::size_t>(V));
        std::int64_t tok = m.config().decoder_start_token_id;
        locost_emulator::traffic_counts before;
        for (index_t t = 0; t < steps; ++t) {
            if (t == warm) before = locost_emulator::traffic();
            m.step(st, &tok, 1, logits.data());
            tok = std::max_element(logits.begin(), logits.end()) - logits.begin();
        }
        const auto d = locost_emulator::traffic() - before;
        const auto n = static_cast<std::uint64_t>(steps - warm);
        MESSAGE(dir << ": per step " << d.launches / n << " kernel launches, " << d.blas_calls / n << " cuBLAS calls, "
                    << d.host_to_device / n << " host-to-device copies (" << d.host_to_device_bytes / n << " bytes), "
                    << d.device_to_host / n << " device-to-host (" << d.device_to_host_bytes / n << " bytes), " << d.synchronizations / n
                    << " waits, " << d.mallocs << " cudaMalloc, " << d.frees << " cudaFree");
        const auto heads = static_cast<std::uint64_t>(m.config().num_heads);
        CHECK(d.device_to_host == n);
        CHECK(d.device_to_host_bytes == n * static_cast<std::uint64_t>(V) * sizeof(float));
        CHECK(d.host_to_device == n * id_uploads);
        CHECK(d.host_to_device_bytes == n * 8 * id_uploads);  // one id of 8 bytes per upload
        CHECK(heads <= 16);                                   // (each attention call's problems fit the launch's parameters)
        CHECK(d.synchronizations == n * (id_uploads + 1));
        CHECK(d.device_to_device == 0);
        CHECK(d.mallocs == 0);
        CHECK(d.frees == 0);
    }
}
#endif

// Acceptance (issue 13): the base-size LOCOST encoder at 16384 tokens gives the same states on
// the CPU and CUDA backends (within 1e-4 of the largest state). It needs the base demo checkpoint
// (UNTRAINED weights: `locost demo-checkpoint --config base`) named by LOCOST_BASE_MODEL, which
// CTest's long runs set (label "long": minutes on the emulator, where CTest also requires that
// doctest report exactly this one case passed); without it doctest reports the case as skipped.
TEST_CASE("cuda LOCOST encoder at base size and 16384 tokens: the CPU and CUDA backends agree" *
          doctest::skip(std::getenv("LOCOST_BASE_MODEL") == nullptr)) {
    const auto ck = locost::io::checkpoint::open(std::getenv("LOCOST_BASE_MODEL"));
    const index_t L = 16384;
    auto gpu = locost::models::load_encoder<float, cuda>(ck);
    auto host = locost::models::load_encoder<float, locost::cpu>(ck);
    const auto ids = test::spread_ids(L, gpu.config().vocab_size);
    const auto got = locost::to_host(gpu.forward(ids.data(), nullptr, 1, L));
    const auto want = host.forward(ids.data(), nullptr, 1, L);
    REQUIRE(got.numel() == want.numel());
    double diff = 0, scale = 0;
    for (index_t i = 0; i < want.numel(); ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(got.data()[i]) - static_cast<double>(want.data()[i])));
        scale = std::max(scale, std::abs(static_cast<double>(want.data()[i])));
    }
    MESSAGE("base encoder at " << L << " tokens: max |CUDA - CPU| / max |CPU| = " << diff / scale);
    CHECK(diff / scale < 1e-4);
}

// The GPU memory estimate (models/memory_estimate.hpp, device = cuda) against what the backend's
// caching allocator really holds, phase by phase, with the cache emptied before each phase. The
// upper bound: blocks held from the driver stay under the estimate less what cuBLAS and cuFFT hold
// themselves, outside the allocator. The lower bound (the estimate is not loose): live blocks reach
// 90 % of the estimate's buffers, leaving out also the allowances for the worst case (the attention
// partials' budget and the rounding at 1/8).
TEST_CASE("cuda memory: the GPU estimate bounds what the allocator holds, LOCOST at 2000 and 20000 tokens") {
    using namespace test;
    namespace cd = locost::cuda_detail;
    const auto ck = locost::io::checkpoint::open(tiny_dir);
    const auto cfg = locost::models::read_config(ck);
    for (const index_t L : {2000, 20000}) {
        CAPTURE(L);
        locost::models::model_options o;
        o.encoder.tile_rows = 4096;
        const index_t steps = 6;
        locost::models::memory_request r;
        r.length = L;
        r.decoder = true;
        r.decoder_positions = steps;
        r.device = locost::device_kind::cuda;
        const auto est = locost::models::estimate_memory(*cfg, o, r);
        auto phase = [&](const std::string& name, bool lower) {
            for (const auto& p : est.phases)
                if (p.name == name) {
                    double sum = 0;
                    for (const auto& item : p.items)
                        if (!locost::models::detail::library_workspace(item) &&
                            (!lower || (item.what != "allocator rounding (at most)" && item.what != "attention partials (at most)")))
                            sum += item.bytes;
                    return sum;
                }
            FAIL("no phase " << name);
            return 0.0;
        };
        INFO("the estimate:\n" << est.table());
        struct held {
            double live, reserved;
        };
        cd::release_cached_memory();
        const std::size_t before = cd::memory_stats().current;
        auto start_phase = [&] {
            cd::release_cached_memory();
            cd::reset_peak_memory();
        };
        auto end_phase = [&] {
            cd::synchronize();
            const auto s = cd::memory_stats();
            return held{static_cast<double>(s.peak - before), static_cast<double>(s.peak_reserved - before)};
        };
        start_phase();
        auto m = model_on<cuda>(tiny_dir, o);
        const held load = end_phase();
        const auto ids = test::spread_ids(L, locost::models::common(*cfg).vocab_size);
        start_phase();
        auto e = m.encode(ids.data(), nullptr, 1, L);
        const held encode = end_phase();
        start_phase();
        test::decode_greedily(m, e, steps);
        const held decode = end_phase();
        const double encode_est = std::max(phase("encode", false), phase("cache", false));
        const double encode_low = std::max(phase("encode", true), phase("cache", true));
        INFO("held (live / from the driver): load " << load.live << " / " << load.reserved << ", encode and cache " << encode.live << " / "
                                                    << encode.reserved << ", decode " << decode.live << " / " << decode.reserved);
        CHECK(load.reserved <= phase("load", false));
        CHECK(encode.reserved <= encode_est);
        CHECK(decode.reserved <= phase("decode", false));
        CHECK(load.live >= 0.9 * phase("load", true));
        CHECK(encode.live >= 0.9 * encode_low);
        CHECK(decode.live >= 0.9 * phase("decode", true));
        MESSAGE("L " << L << ": held / estimate: load " << load.reserved / phase("load", false) << ", encode "
                     << encode.reserved / encode_est << ", decode " << decode.reserved / phase("decode", false)
                     << "; live / estimate without the fixed items: load " << load.live / phase("load", true) << ", encode "
                     << encode.live / encode_low << ", decode " << decode.live / phase("decode", true));
    }
}

// The tool with --device cuda prints the ids --device cpu prints (greedy, the tiny LOCOST checkpoint).
TEST_CASE("cuda tool: generate --device cuda equals --device cpu") {
    using namespace test;
    const std::string dir = scratch_dir("cuda_tool");
    {
        std::ofstream f(dir + "/ids.json");
        f << "[[5, 17, 3, 99, 41, 8, 1]]\n";
    }
    auto run = [&](const std::string& device) {
        const std::string out = dir + "/" + device + ".txt";
        const std::string cmd = std::string(LOCOST_TOOL) + " generate --model " + tiny_dir + " --ids " + dir +
            "/ids.json --max-new-tokens 8 --device " + device + " >" + out + " 2>" + out + ".err";
        CHECK(std::system(cmd.c_str()) == 0);
        std::ifstream f(out);
        return std::string(std::istreambuf_iterator<char>(f), {});
    };
    const std::string cpu = run("cpu"), gpu = run("cuda");
    CHECK(!cpu.empty());
    CHECK(gpu == cpu);
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
