// Core kernels against plain scalar loops: the GEMM every projection calls, over both scalar
// types, every transposition, padded leading dimensions, alpha/beta, and the row counts where the
// CPU backend switches strategy (matrix-vector products, the few-rows kernel of decoding steps,
// the BLAS GEMM, split over threads along M or N).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <locost/backend/block_cache.hpp>
#include <locost/locost.hpp>
#include <cstdlib>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <random>
#include <vector>

#include "helpers.hpp"

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(g));
    return v;
}

// One attention problem: nq queries of width d (rows d apart) over nk keys and values, into out.
locost::ops::attention_problem<float> attention_problem_of(const std::vector<float>& q, locost::index_t nq, locost::index_t d,
                                                           const locost::ops::kv_matrix& k, const locost::ops::kv_matrix& v, locost::index_t nk,
                                                           std::vector<float>& out) {
    locost::ops::attention_problem<float> p;
    p.q = q.data();
    p.nq = nq;
    p.ldq = d;
    p.k = k;
    p.v = v;
    p.nk = nk;
    p.out = out.data();
    p.ldo = d;
    return p;
}

// C = alpha · op(A) · op(B) + beta · C in double, element by element.
template <class T>
void reference_gemm(const locost::ops::gemm_args& g, double alpha, const T* a, const T* b, double beta, std::vector<double>& c) {
    for (locost::index_t i = 0; i < g.m; ++i)
        for (locost::index_t j = 0; j < g.n; ++j) {
            double s = 0;
            for (locost::index_t k = 0; k < g.k; ++k) {
                const double x = g.trans_a ? a[k * g.lda + i] : a[i * g.lda + k];
                const double y = g.trans_b ? b[j * g.ldb + k] : b[k * g.ldb + j];
                s += x * y;
            }
            double& out = c[static_cast<std::size_t>(i * g.ldc + j)];
            out = alpha * s + (beta == 0.0 ? 0.0 : beta * out);
        }
}

} // namespace

TEST_CASE_TEMPLATE("gemm: every strategy of the CPU backend, on every float32 provider of the build, equals the scalar loop", T, float,
                   double) {
    using locost::index_t;
    const int saved = locost::num_threads();
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
    // float32: each provider this build has (double always takes OpenBLAS, else Eigen: once)
    std::vector<locost::gemm_provider> providers;
    if constexpr (std::is_same_v<T, float>)
        for (const auto& c : locost::gemm_candidates()) providers.push_back(c.provider);
    else
        providers.push_back(locost::float32_gemm().provider);
    for (const auto provider : providers)
    for (int threads : {1, 2}) {
        if constexpr (std::is_same_v<T, float>) locost::set_float32_gemm(provider);
        locost::set_num_threads(threads);
        for (index_t m : {1, 2, 3, 4, 5, 8, 9, 40})
            for (const auto& kn : {std::pair<index_t, index_t>{64, 48}, {77, 301}, {768, 33}, {130, 2048}})
                for (int t = 0; t < 4; ++t)
                    for (double beta : {0.0, 1.0, 0.5}) {
                        const index_t k = kn.first, n = kn.second;  // plain names: doctest's INFO captures them
                        locost::ops::gemm_args g;
                        g.trans_a = (t & 1) != 0;
                        g.trans_b = (t & 2) != 0;
                        g.m = m;
                        g.n = n;
                        g.k = k;
                        g.lda = (g.trans_a ? m : k) + 3;  // padded rows
                        g.ldb = (g.trans_b ? k : n) + 5;
                        g.ldc = n + 2;
                        const auto a = random_values<T>(static_cast<std::size_t>((g.trans_a ? k : m) * g.lda), 1);
                        const auto b = random_values<T>(static_cast<std::size_t>((g.trans_b ? n : k) * g.ldb), 2);
                        auto c = random_values<T>(static_cast<std::size_t>(m * g.ldc), 3);
                        // beta = 0 must ignore what C held, NaN included
                        if (beta == 0.0) c.assign(c.size(), std::numeric_limits<T>::quiet_NaN());
                        std::vector<double> expect(c.begin(), c.end());
                        reference_gemm(g, 0.75, a.data(), b.data(), beta, expect);
                        locost::ops::gemm<locost::cpu, T>(g, T(0.75), a.data(), b.data(), static_cast<T>(beta), c.data());
                        double worst = 0;
                        for (index_t i = 0; i < m; ++i)
                            for (index_t j = 0; j < n; ++j) {
                                const auto at = static_cast<std::size_t>(i * g.ldc + j);
                                worst = std::max(worst, std::abs(static_cast<double>(c[at]) - expect[at]) / std::sqrt(static_cast<double>(k)));
                            }
                        INFO("provider " << locost::provider_name(provider) << " threads " << threads << " m " << m << " k " << k << " n " << n << " trans_a " << g.trans_a
                                        << " trans_b " << g.trans_b << " beta " << beta);
                        CHECK(worst <= tol);
                        // the padding between rows of C is never written
                        for (index_t i = 0; i < m; ++i)
                            for (index_t j = n; j < g.ldc; ++j) {
                                const auto at = static_cast<std::size_t>(i * g.ldc + j);
                                CHECK((std::isnan(static_cast<double>(c[at])) ? std::isnan(expect[at]) : c[at] == static_cast<T>(expect[at])));
                            }
                    }
    }
    locost::set_float32_gemm(std::nullopt);
    locost::set_num_threads(saved);
}

TEST_CASE("gemm provider: OpenBLAS's kernel names map to the ISA they use") {
    using locost::vector_isa;
    CHECK(locost::openblas_core_isa("Prescott") == vector_isa::sse);
    CHECK(locost::openblas_core_isa("Core2") == vector_isa::sse);
    CHECK(locost::openblas_core_isa("Nehalem") == vector_isa::sse);
    CHECK(locost::openblas_core_isa("Sandybridge") == vector_isa::avx);
    CHECK(locost::openblas_core_isa("Haswell") == vector_isa::avx2);
    CHECK(locost::openblas_core_isa("Zen") == vector_isa::avx2);
    CHECK(locost::openblas_core_isa("SkylakeX") == vector_isa::avx512);
    CHECK(locost::openblas_core_isa("COOPERLAKE") == vector_isa::avx512);
    CHECK(locost::openblas_core_isa("SapphireRapids") == vector_isa::avx512);
    CHECK(locost::openblas_core_isa("Zen5") == vector_isa::sse);  // unknown names prove nothing
}

TEST_CASE("gemm provider: the rule takes a library whose kernel uses the CPU's widest ISA, never OpenBLAS's narrower fallback") {
    using locost::gemm_provider;
    using locost::vector_isa;
    const locost::gemm_candidate prescott{gemm_provider::openblas, vector_isa::sse, "Prescott"},
        haswell{gemm_provider::openblas, vector_isa::avx2, "Haswell"}, skylakex{gemm_provider::openblas, vector_isa::avx512, "SkylakeX"},
        dnnl512{gemm_provider::onednn, vector_isa::avx512, "avx512_core"}, dnnl2{gemm_provider::onednn, vector_isa::avx2, "avx2"},
        eigen512{gemm_provider::eigen, vector_isa::avx512, "compiled for AVX-512"}, eigen_sse{gemm_provider::eigen, vector_isa::sse, "compiled for SSE2"};
    // oneDNN when it covers the CPU, whatever OpenBLAS picked
    auto c = locost::choose_gemm(vector_isa::avx512, {skylakex, dnnl512, eigen512}, "");
    CHECK(c.provider == gemm_provider::onednn);
    CHECK(c.reason == "oneDNN's kernels (avx512_core) use this CPU's widest ISA, AVX-512");
    CHECK(c.describe() == "oneDNN sgemm (avx512_core, AVX-512)");
    CHECK(locost::choose_gemm(vector_isa::avx512, {prescott, dnnl512, eigen512}, "").provider == gemm_provider::onednn);
    CHECK(locost::choose_gemm(vector_isa::avx512, {haswell, dnnl512, eigen512}, "auto").provider == gemm_provider::onednn);
    CHECK(locost::choose_gemm(vector_isa::avx2, {haswell, dnnl2, eigen_sse}, "").provider == gemm_provider::onednn);
    // without oneDNN (or with one narrower than the CPU): OpenBLAS when its kernel covers the CPU
    c = locost::choose_gemm(vector_isa::avx512, {skylakex, eigen512}, "");
    CHECK(c.provider == gemm_provider::openblas);
    CHECK(c.reason == "no oneDNN in this build; OpenBLAS's kernel SkylakeX uses this CPU's widest ISA, AVX-512");
    CHECK(c.describe() == "OpenBLAS sgemm (SkylakeX, AVX-512)");
    c = locost::choose_gemm(vector_isa::avx512, {skylakex, dnnl2, eigen512}, "");
    CHECK(c.provider == gemm_provider::openblas);
    CHECK(c.reason == "oneDNN reaches AVX2 only; OpenBLAS's kernel SkylakeX uses this CPU's widest ISA, AVX-512");
    // OpenBLAS's fallback for a CPU it does not know, or a forced older core type, is never taken
    // while something wider is there: Eigen built with -march=native
    c = locost::choose_gemm(vector_isa::avx512, {prescott, eigen512}, "");
    CHECK(c.provider == gemm_provider::eigen);
    CHECK(c.reason == "no oneDNN in this build; OpenBLAS's kernel Prescott uses SSE, not this CPU's AVX-512; so the widest available");
    CHECK(locost::choose_gemm(vector_isa::avx512, {haswell, dnnl2, eigen512}, "").provider == gemm_provider::eigen);
    CHECK(locost::choose_gemm(vector_isa::avx2, {prescott, dnnl2, eigen_sse}, "").provider == gemm_provider::onednn);
    c = locost::choose_gemm(vector_isa::avx2, {eigen_sse}, "");
    CHECK(c.provider == gemm_provider::eigen);
    CHECK(c.reason == "no oneDNN in this build; no OpenBLAS; so the widest available");
    // LOCOST_GEMM names one; a name this build lacks, or one that is no provider, is an error
    CHECK(locost::choose_gemm(vector_isa::avx512, {skylakex, dnnl512, eigen512}, "eigen").provider == gemm_provider::eigen);
    CHECK(locost::choose_gemm(vector_isa::avx512, {prescott, dnnl512, eigen512}, "openblas").reason == "LOCOST_GEMM=openblas");
    test::check_error([&] { (void)locost::choose_gemm(vector_isa::avx512, {skylakex, eigen512}, "onednn"); }, "gemm.provider_unavailable",
                "LOCOST_GEMM=onednn: this build has no onednn (configure with -DLOCOST_USE_ONEDNN=ON)");
    test::check_error([&] { (void)locost::choose_gemm(vector_isa::avx512, {skylakex, eigen512}, "mkl"); }, "gemm.unknown_provider",
                "LOCOST_GEMM=mkl: expected auto, openblas, onednn or eigen");
}

// The check issue 31 asks for, on the machine the tests run on: a CPU with AVX2 or AVX-512 gets a
// float32 kernel that uses it (unless LOCOST_GEMM names a provider on purpose).
TEST_CASE("gemm provider: the float32 kernel in force uses this machine's widest vector ISA") {
    const auto machine = locost::machine_isa();
    const auto chosen = locost::float32_gemm();
    const char* forced = std::getenv("LOCOST_GEMM");
    INFO("machine " << locost::isa_name(machine) << "; chosen " << chosen.describe() << ": " << chosen.reason);
    if (forced && *forced && std::string(forced) != "auto") {
        MESSAGE("LOCOST_GEMM=" << forced << " chose the provider; the ISA check applies to the automatic choice");
        return;
    }
    if (machine == locost::vector_isa::unknown) {
        MESSAGE("not an x86 CPU: no vector ISA to check");
        return;
    }
    CHECK(chosen.isa >= std::min(machine, locost::vector_isa::avx512));
}

TEST_CASE("linear: bfloat16 and int8 weights equal the scalar loop over their widened values (fused few-rows kernel, row groups over stretches of k, widen-then-GEMM, bfloat16 and int8 products)") {
    // What is checked: the stored values (bfloat16 = round-to-nearest-even of W; int8 = round of
    // W/s with s = max|row|/127) and that the kernels compute x·Wᵀ with exactly those values
    // (accumulating in float32: tolerance as the GEMM test's). bf16_products over more than 8
    // rows also rounds x to bfloat16 (oneDNN's matmul where built with it), so there the loop
    // takes the rounded x; i8_products likewise quantizes each row of x to int8 with its own
    // scale (the definition in ops/linear.hpp, written out here). The rounding error of the storage itself against float32 W is
    // bounded separately below.
    using locost::index_t;
    using P = locost::ops::weight_precision;
    const int saved = locost::num_threads();
    for (int threads : {1, 2})
        for (P p : {P::native, P::bf16, P::i8, P::bf16_products, P::i8_products})
            for (index_t rows : {1, 2, 3, 5, 8, 9, 15, 33, 1100})
                // in 3,077: the row groups go over k in several stretches, and a tail
                for (const auto& io : {std::pair<index_t, index_t>{768, 100}, {13, 7}, {64, 2048}, {130, 37}, {3077, 40}})
                    for (bool accumulate : {false, true}) {
                        locost::set_num_threads(threads);
                        const index_t in = io.first, out = io.second, ldx = in + 3, ldy = out + 2;
                        locost::tensor<float> w({out, in});
                        const auto wv = random_values<float>(static_cast<std::size_t>(out * in), 7);
                        std::copy(wv.begin(), wv.end(), w.data());
                        for (index_t k = 0; k < in; ++k) w[3 % out * in + k] = 0.0f;  // an all-zero channel
                        const locost::layers::weight_matrix<float, locost::cpu> m(w, p);
                        // the values the storage holds, widened exactly
                        std::vector<double> stored(static_cast<std::size_t>(out * in));
                        const auto v = m.view();
                        double worst_storage = 0;
                        for (index_t o = 0; o < out; ++o) {
                            double row_max = 0;
                            for (index_t k = 0; k < in; ++k) row_max = std::max(row_max, std::abs(static_cast<double>(w[o * in + k])));
                            for (index_t k = 0; k < in; ++k) {
                                const auto at = static_cast<std::size_t>(o * in + k);
                                if (p == P::native) stored[at] = static_cast<const float*>(v.data)[at];
                                else if (locost::ops::stored_bf16(p)) stored[at] = locost::bf16_to_float(static_cast<const std::uint16_t*>(v.data)[at]);
                                else if (!locost::ops::stored_i8(p)) FAIL("an unknown storage");
                                else stored[at] = static_cast<double>(static_cast<const std::int8_t*>(v.data)[at]) * v.scale[o];
                                const double e = std::abs(stored[at] - static_cast<double>(w[o * in + k]));
                                // bfloat16: half an ulp of 8 bits (2^-8 relative); int8: half a step of max|row|/127
                                const double bound = p == P::native ? 0.0 : locost::ops::stored_bf16(p) ? std::abs(static_cast<double>(w[o * in + k])) * 0x1p-8 : row_max / 254.0 + row_max * 1e-6;
                                worst_storage = std::max(worst_storage, e - bound);
                            }
                        }
                        auto x = random_values<float>(static_cast<std::size_t>(rows * ldx), 8);
                        // what the product multiplies: x itself, or x rounded to bfloat16
                        std::vector<double> xs(x.begin(), x.end());
                        if (p == P::bf16_products && rows > 8)
                            for (auto& v : xs) v = locost::bf16_to_float(locost::float_to_bf16(static_cast<float>(v)));
                        if (p == P::i8_products && rows > 8)
                            for (index_t i = 0; i < rows; ++i) {
                                float m = 0;
                                for (index_t k = 0; k < in; ++k) m = std::max(m, std::fabs(x[static_cast<std::size_t>(i * ldx + k)]));
                                const float inv = 127.0f / m, s = m / 127.0f;
                                for (index_t k = 0; k < in; ++k) {
                                    const auto at = static_cast<std::size_t>(i * ldx + k);
                                    xs[at] = static_cast<double>(std::nearbyint(x[at] * inv)) * static_cast<double>(s);
                                }
                            }
                        auto y = random_values<float>(static_cast<std::size_t>(rows * ldy), 9);
                        if (!accumulate) y.assign(y.size(), std::numeric_limits<float>::quiet_NaN());
                        std::vector<double> expect(y.begin(), y.end());
                        for (index_t i = 0; i < rows; ++i)
                            for (index_t o = 0; o < out; ++o) {
                                double s = 0;
                                for (index_t k = 0; k < in; ++k) s += xs[static_cast<std::size_t>(i * ldx + k)] * stored[static_cast<std::size_t>(o * in + k)];
                                double& e = expect[static_cast<std::size_t>(i * ldy + o)];
                                e = 0.5 * s + (accumulate ? e : 0.0);
                            }
                        const auto y0 = y;
                        m.apply(x.data(), ldx, rows, y.data(), ldy, 0.5f, accumulate);
                        double worst = 0;
                        for (index_t i = 0; i < rows; ++i)
                            for (index_t o = 0; o < out; ++o) {
                                const auto at = static_cast<std::size_t>(i * ldy + o);
                                worst = std::max(worst, std::abs(static_cast<double>(y[at]) - expect[at]) / std::sqrt(static_cast<double>(in)));
                            }
                        INFO("threads " << threads << " precision " << static_cast<int>(p) << " rows " << rows << " in " << in << " out " << out
                                        << " accumulate " << accumulate);
                        CHECK(worst_storage <= 0.0);
                        CHECK(worst <= 2e-5);
                        for (index_t i = 0; i < rows; ++i)  // the padding of y is never written
                            for (index_t o = out; o < ldy; ++o) CHECK(std::isnan(y[static_cast<std::size_t>(i * ldy + o)]) == !accumulate);
                        CHECK(m.bytes() == static_cast<std::size_t>(out * in) * (p == P::native ? 4 : locost::ops::stored_bf16(p) ? 2 : 1) +
                                               (locost::ops::stored_i8(p) ? static_cast<std::size_t>(out) * 4 : 0));
                        // Up to 64 rows (a batch of documents decoding together: one row each)
                        // every row is bit for bit its own one-row product, so a document's
                        // result in a batch is that of its own run (products that round x aside).
                        if (rows <= 64 && (p == P::native || p == P::bf16 || p == P::i8)) {
                            index_t differ = 0;
                            for (index_t i = 0; i < rows; ++i) {
                                std::vector<float> one(y0.begin() + i * ldy, y0.begin() + (i + 1) * ldy);
                                m.apply(x.data() + i * ldx, ldx, 1, one.data(), ldy, 0.5f, accumulate);
                                for (index_t o = 0; o < out; ++o) differ += one[static_cast<std::size_t>(o)] != y[static_cast<std::size_t>(i * ldy + o)];
                            }
                            CHECK(differ == 0);
                        }
                    }
    locost::set_num_threads(saved);
    // double computation has no reduced-precision kernels: refused by name
    locost::tensor<float> w({2, 2}, 1.0f);
    CHECK_THROWS_WITH((locost::layers::weight_matrix<double, locost::cpu>(w, locost::ops::weight_precision::i8)),
                      "[locost.weights.precision] reduced-precision weights (bfloat16, int8) need float32 computation");
}

TEST_CASE("attention: bfloat16 and int8 keys/values, fused (1-4 query rows), blocked and shared-key paths (exact, and with bfloat16 and int8 products), equal a softmax over the widened values") {
    using locost::index_t;
    using K = locost::ops::kv_precision;
    for (K prec : {K::f32, K::bf16, K::i8})
        for (index_t d : {64, 32, 128, 48, 24})
            for (index_t nq : {1, 2, 3, 4, 5})
                for (index_t nk : {1, 7, 300, 600, 2500}) {  // 2500: blocks of keys with an online softmax
                    const index_t ld = d + 8;  // keys/values in a wider row, as the cache's interleaved layout
                    const auto q = random_values<float>(static_cast<std::size_t>(nq * d), 11);
                    const auto kf = random_values<float>(static_cast<std::size_t>(nk * ld), 12);
                    const auto vf = random_values<float>(static_cast<std::size_t>(nk * ld), 13);
                    std::vector<std::uint16_t> kb(kf.size()), vb(vf.size());
                    std::vector<std::int8_t> ki(kf.size()), vi(vf.size());
                    std::vector<float> ks(static_cast<std::size_t>(nk)), vs(static_cast<std::size_t>(nk));
                    std::vector<double> kw(kf.size()), vw(vf.size());  // the values each storage holds
                    for (index_t j = 0; j < nk; ++j)
                        for (int which = 0; which < 2; ++which) {
                            const auto& f = which ? vf : kf;
                            auto& b = which ? vb : kb;
                            auto& i8 = which ? vi : ki;
                            auto& sc = which ? vs : ks;
                            auto& w = which ? vw : kw;
                            float m = 0;
                            for (index_t c = 0; c < d; ++c) m = std::max(m, std::abs(f[static_cast<std::size_t>(j * ld + c)]));
                            sc[static_cast<std::size_t>(j)] = m / 127.0f;
                            for (index_t c = 0; c < d; ++c) {
                                const auto at = static_cast<std::size_t>(j * ld + c);
                                b[at] = locost::float_to_bf16(f[at]);
                                i8[at] = static_cast<std::int8_t>(std::nearbyint(f[at] / sc[static_cast<std::size_t>(j)]));
                                w[at] = prec == K::f32 ? f[at] : prec == K::bf16 ? locost::bf16_to_float(b[at]) : i8[at] * static_cast<double>(sc[static_cast<std::size_t>(j)]);
                            }
                        }
                    auto mat = [&](bool values) {
                        locost::ops::kv_matrix m;
                        m.precision = prec;
                        m.ld = ld;
                        m.data = prec == K::f32 ? static_cast<const void*>((values ? vf : kf).data())
                                 : prec == K::bf16 ? static_cast<const void*>((values ? vb : kb).data())
                                                   : static_cast<const void*>((values ? vi : ki).data());
                        if (prec == K::i8) m.scale = (values ? vs : ks).data();
                        return m;
                    };
                    std::vector<float> out(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN());
                    const auto p = attention_problem_of(q, nq, d, mat(false), mat(true), nk, out);
                    locost::ops::attention<locost::cpu, float>({p}, d);
                    // max |o − softmax(q·Kᵀ)·V| over the values each storage holds, in double
                    auto error_of = [&](const std::vector<float>& o_got, const std::vector<double>& values) {
                        double worst = 0;
                        for (index_t i = 0; i < nq; ++i) {
                            std::vector<double> sc(static_cast<std::size_t>(nk));
                            double mx = -1e300, sum = 0;
                            for (index_t j = 0; j < nk; ++j) {
                                double s = 0;
                                for (index_t c = 0; c < d; ++c) s += static_cast<double>(q[static_cast<std::size_t>(i * d + c)]) * kw[static_cast<std::size_t>(j * ld + c)];
                                sc[static_cast<std::size_t>(j)] = s;
                                mx = std::max(mx, s);
                            }
                            for (auto& s : sc) sum += (s = std::exp(s - mx));
                            for (index_t c = 0; c < d; ++c) {
                                double o = 0;
                                for (index_t j = 0; j < nk; ++j) o += sc[static_cast<std::size_t>(j)] / sum * values[static_cast<std::size_t>(j * ld + c)];
                                worst = std::max(worst, std::abs(o - static_cast<double>(o_got[static_cast<std::size_t>(i * d + c)])));
                            }
                        }
                        return worst;
                    };
                    const double worst = error_of(out, vw);
                    // The same queries over one matrix that is keys and values at once (folded
                    // cross-attention): keys split over the threads, blocks of 128, online softmax.
                    std::vector<float> shared(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN());
                    locost::ops::shared_kv_attention<locost::cpu, float>(q.data(), nq, d, mat(false), nk, d, shared.data(), d);
                    CHECK(error_of(shared, kw) < 2e-6);
                    if (prec == K::bf16) {  // bfloat16 products (compute = bf16): queries and probabilities rounded
                        std::vector<float> b16(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN());
                        locost::ops::shared_kv_attention<locost::cpu, float>(q.data(), nq, d, mat(false), nk, d, b16.data(), d,
                                                                             locost::ops::attention_products::bf16);
                        const double e = error_of(b16, kw);
                        INFO("bf16 products, d " << d << " nq " << nq << " nk " << nk << ": " << e);
                        // Queries rounded to bfloat16 (≤ 2⁻⁹ relative each) move these scores by up to ~1e-2, the
                        // outputs by up to 0.009 here (values within ±1); a wrong tile would be off by O(1).
                        CHECK(e < 2e-2);
#if defined(__AVX512BF16__)
                        if (d % 32 == 0 && nk > 1) CHECK(e > 1e-5);  // the bfloat16 tiles ran, not the exact path
#endif
                        // int8 products over bfloat16 states are bfloat16 products (the states' own precision)
                        std::vector<float> i8b(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN());
                        locost::ops::shared_kv_attention<locost::cpu, float>(q.data(), nq, d, mat(false), nk, d, i8b.data(), d,
                                                                             locost::ops::attention_products::i8);
                        CHECK(i8b == b16);
                    }
                    if (prec == K::i8) {  // int8 products over the cache itself (compute = int8): VNNI tiles for 1-4 queries, d % 64 == 0
                        std::vector<float> c8(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN());
                        locost::ops::attention_problem<float> pi = p;
                        pi.out = c8.data();
                        pi.products = locost::ops::attention_products::i8;
                        locost::ops::attention<locost::cpu, float>({pi}, d);
                        const double e = error_of(c8, vw);
                        INFO("int8 products over the cache, d " << d << " nq " << nq << " nk " << nk << ": " << e);
                        CHECK(e < 3e-2);  // the folded form's bound (below)
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
                        if (d % 64 == 0 && nq <= 4) {
                            if (nk > 1) CHECK(e > 1e-5);  // the int8 tiles ran, not the exact kernels (one key: p = 1, exact)
                        } else {
                            CHECK(c8 == out);  // other shapes: the exact path, unchanged
                        }
#else
                        CHECK(c8 == out);
#endif
                    }
                    if (prec == K::i8) {  // int8 products (compute = int8): queries and probabilities quantized to 8 bits
                        std::vector<float> i8(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN());
                        locost::ops::shared_kv_attention<locost::cpu, float>(q.data(), nq, d, mat(false), nk, d, i8.data(), d,
                                                                             locost::ops::attention_products::i8);
                        const double e = error_of(i8, kw);
                        INFO("int8 products, d " << d << " nq " << nq << " nk " << nk << ": " << e);
                        // Each query quantized to max|q|/127 steps moves a score by up to ~d/254·max|k| (random signs:
                        // far less); the probabilities' 8 bits per block add an error below the states' own. A
                        // wrong tile, a lost row group or a misplaced column would be off by O(1).
                        CHECK(e < 3e-2);  // measured: up to 0.012 (bfloat16 products: 0.009)
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
                        if (d % 16 == 0 && nk > 1) CHECK(e > 1e-5);  // the VNNI tiles ran, not the exact path
#endif
                    }
                    INFO("precision " << static_cast<int>(prec) << " d " << d << " nq " << nq << " nk " << nk);
                    CHECK(worst < 2e-6);
                }
}

TEST_CASE("attention: many queries over float32 keys in bfloat16 products (the dense encoders under compute = bf16 or int8): a position bias, masked keys, a fully masked row") {
    // What the products are: q, k, the softmax's exponentials and v rounded to bfloat16, float32 sums
    // (oneDNN's matmul; rows and keys padded to multiples of 64 inside). Checked against a double
    // softmax over the unrounded values, with a Toeplitz bias (as T5's relative bias) and a key
    // bias that masks keys 3-5 of every row; then a row whose every key is masked (zeros, as the
    // exact path gives).
    using locost::index_t;
    const float inf = std::numeric_limits<float>::infinity();
    for (index_t d : {64, 32, 48, 16, 8})
        for (index_t nq : {16, 100, 300})
            for (index_t nk : {7, 300, 1100}) {
                const index_t ldq = d + 5, ld = 3 * d;  // rows of a wider matrix, as q | k | v of a layer
                const auto q = random_values<float>(static_cast<std::size_t>(nq * ldq), 21);
                auto kv = random_values<float>(static_cast<std::size_t>(nk * ld), 22);
                for (auto& x : kv) x *= 2.0f;  // scores up to ~d/3: a peaked softmax as well as flat ones
                // the band: bias(j - i) for j - i in [-(nq - 1), nk - 1], read at bias + j - i
                const auto band = random_values<float>(static_cast<std::size_t>(nq + nk), 23);
                std::vector<float> key_bias(static_cast<std::size_t>(nk), 0.0f);
                for (index_t j = 3; j < std::min<index_t>(nk, 6); ++j) key_bias[static_cast<std::size_t>(j)] = -inf;
                auto problem = [&](std::vector<float>& out, locost::ops::attention_products products) {
                    locost::ops::attention_problem<float> p;
                    p.q = q.data();
                    p.nq = nq;
                    p.ldq = ldq;
                    p.k = locost::layers::native_rows(kv.data(), ld);
                    p.v = locost::layers::native_rows(kv.data() + 2 * d, ld);
                    p.nk = nk;
                    p.bias = band.data() + (nq - 1);  // row i, key j: bias[j - i]
                    p.ldb = -1;
                    p.key_bias = key_bias.data();
                    p.out = out.data();
                    p.ldo = d;
                    p.products = products;
                    return p;
                };
                auto error_of = [&](const std::vector<float>& got) {
                    double worst = 0;
                    for (index_t i = 0; i < nq; ++i) {
                        std::vector<double> sc(static_cast<std::size_t>(nk));
                        double mx = -1e300, sum = 0;
                        for (index_t j = 0; j < nk; ++j) {
                            double s = static_cast<double>(band[static_cast<std::size_t>(nq - 1 + j - i)]) + key_bias[static_cast<std::size_t>(j)];
                            for (index_t c = 0; c < d; ++c)
                                s += static_cast<double>(q[static_cast<std::size_t>(i * ldq + c)]) * kv[static_cast<std::size_t>(j * ld + c)];
                            sc[static_cast<std::size_t>(j)] = s;
                            mx = std::max(mx, s);
                        }
                        for (auto& s : sc) sum += (s = std::exp(s - mx));
                        for (index_t c = 0; c < d; ++c) {
                            double o = 0;
                            for (index_t j = 0; j < nk; ++j) o += sc[static_cast<std::size_t>(j)] / sum * kv[static_cast<std::size_t>(j * ld + 2 * d + c)];
                            worst = std::max(worst, std::abs(o - static_cast<double>(got[static_cast<std::size_t>(i * d + c)])));
                        }
                    }
                    return worst;
                };
                using A = locost::ops::attention_products;
                std::vector<float> exact(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN()), b16(exact), i8(exact);
                locost::ops::attention<locost::cpu, float>({problem(exact, A::exact)}, d);
                locost::ops::attention<locost::cpu, float>({problem(b16, A::bf16)}, d);
                locost::ops::attention<locost::cpu, float>({problem(i8, A::i8)}, d);
                const double e_exact = error_of(exact), e = error_of(b16);
                INFO("d " << d << " nq " << nq << " nk " << nk << ": exact " << e_exact << ", bfloat16 products " << e);
                CHECK(e_exact < 2e-5);  // float32 sums of scores up to ~20 and values within ±2: measured ≤ 7.8e-6
                // Four roundings of 2^-9 (relative) each: scores off by up to ~0.05 at these sizes,
                // outputs (values within ±2) by a few 1e-2; a wrong tile or padding would be off by O(1).
                CHECK(e < 6e-2);
                CHECK(i8 == b16);  // int8 compute multiplies such problems in bfloat16 too
#if defined(LOCOST_USE_ONEDNN) && defined(__AVX512F__)
                CHECK(e > 1e-5);  // oneDNN's bfloat16 matmul ran, not the exact path
#endif
            }
    // A row whose every key is masked gives zeros, as the exact path does.
    const index_t d = 64, nq = 32, nk = 70;
    const auto q = random_values<float>(static_cast<std::size_t>(nq * d), 31);
    const auto kv = random_values<float>(static_cast<std::size_t>(nk * d), 32);
    std::vector<float> bias(static_cast<std::size_t>(nq * nk), 0.0f);
    for (index_t j = 0; j < nk; ++j) bias[static_cast<std::size_t>(5 * nk + j)] = -inf;  // row 5: nothing to attend to
    std::vector<float> out(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN()), exact(out);
    auto p = attention_problem_of(q, nq, d, locost::layers::native_rows(kv.data(), d), locost::layers::native_rows(kv.data(), d), nk, exact);
    p.bias = bias.data();
    p.ldb = locost::ops::dense_bias;
    locost::ops::attention<locost::cpu, float>({p}, d);
    p.out = out.data();
    p.products = locost::ops::attention_products::bf16;
    locost::ops::attention<locost::cpu, float>({p}, d);
    for (index_t c = 0; c < d; ++c) CHECK(out[static_cast<std::size_t>(5 * d + c)] == 0.0f);
    for (index_t c = 0; c < d; ++c) CHECK(exact[static_cast<std::size_t>(5 * d + c)] == 0.0f);
    double worst = 0;
    for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(out[i]) - exact[i]));
    CHECK(worst < 6e-2);
    CHECK(std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); }));

    // Many problems in one call, listed as local_attention lists them (query block after query
    // block, the heads within): each head's blocks share keys and values, which the op rounds
    // once for them all. Every result equals the same problem solved alone, on one thread or two.
    // (Where oneDNN has no bfloat16 matmul — Debian's for a CPU without AVX-512 — the problems run
    // the exact path, whose GEMM a problem alone splits over both threads: equal then within float32
    // summation order, 1e-5 of values within ±2, not bit for bit.)
#if defined(LOCOST_USE_ONEDNN)
    const bool bf16_ran = [] {
        namespace cd = locost::cpu_detail;
        const std::vector<std::uint16_t> x(cd::onednn_row_multiple * 16, 0), w(16 * 16, 0);
        std::vector<float> y(cd::onednn_row_multiple * 16);
        return cd::onednn_products::instance().run(x.data(), cd::onednn_row_multiple,
                                                   locost::ops::weight_view{locost::ops::weight_precision::bf16, w.data(), nullptr, 16, 16},
                                                   y.data(), 16, 1.0f, false);
    }();
#else
    const bool bf16_ran = false;
#endif
    MESSAGE("bfloat16 products through oneDNN on this CPU: " << (bf16_ran ? "yes" : "no (the exact path runs)"));
    const int saved = locost::num_threads();
    for (int threads : {1, 2}) {
        locost::set_num_threads(threads);
        const index_t heads = 3, L = 200, keys = 300, ldq2 = heads * d, ldkv = 2 * heads * d;
        const auto q2 = random_values<float>(static_cast<std::size_t>(L * ldq2), 41);
        const auto kv2 = random_values<float>(static_cast<std::size_t>(keys * ldkv), 42);
        const auto band = random_values<float>(static_cast<std::size_t>(L + keys), 43);
        std::vector<float> together(static_cast<std::size_t>(L * ldq2), std::numeric_limits<float>::quiet_NaN()), alone(together);
        std::vector<locost::ops::attention_problem<float>> problems;
        for (auto [i0, i1] : {std::pair<index_t, index_t>{0, 64}, {64, 150}, {150, 200}})
            for (index_t h = 0; h < heads; ++h) {
                locost::ops::attention_problem<float> b;
                b.q = q2.data() + i0 * ldq2 + h * d;
                b.nq = i1 - i0;
                b.ldq = ldq2;
                b.k = locost::layers::native_rows(kv2.data() + 2 * h * d, ldkv);
                b.v = locost::layers::native_rows(kv2.data() + 2 * h * d + d, ldkv);
                b.nk = keys;
                b.bias = band.data() + (L - 1) - i0;  // row i of the block, key j: band[L − 1 + j − (i0 + i)]
                b.ldb = -1;
                b.out = together.data() + i0 * ldq2 + h * d;
                b.ldo = ldq2;
                b.products = locost::ops::attention_products::bf16;
                problems.push_back(b);
            }
        locost::ops::attention<locost::cpu, float>(problems, d);
        for (auto b : problems) {
            b.out = alone.data() + (b.out - together.data());
            locost::ops::attention<locost::cpu, float>({b}, d);
        }
        INFO("threads " << threads);
        CHECK(std::none_of(together.begin(), together.end(), [](float x) { return std::isnan(x); }));
        if (bf16_ran) {
            CHECK(together == alone);
        } else {
            double apart = 0;
            for (std::size_t i = 0; i < together.size(); ++i) apart = std::max(apart, std::abs(static_cast<double>(together[i]) - alone[i]));
            CHECK(apart < 1e-4);
        }
    }
    locost::set_num_threads(saved);
}

TEST_CASE("attention: a few queries over a long cache go by blocks of keys (online softmax), exact and in int8 products: biases, masked blocks, a late maximum, a fully masked row") {
    using locost::index_t;
    using K = locost::ops::kv_precision;
    constexpr float neg_inf = -std::numeric_limits<float>::infinity();
    const index_t d = 64, nk = 2600;  // two full blocks of 1024 keys and a partial one
    using A = locost::ops::attention_products;
    for (auto [prec, products] : {std::pair{K::f32, A::exact}, std::pair{K::i8, A::exact}, std::pair{K::i8, A::i8}})
        for (index_t nq : {1, 2, 3, 4})
            for (int bias_form : {0, 1, 2}) {  // 0: dense bias (nq × nk), 1: one bias row for every query, 2: none
                auto q = random_values<float>(static_cast<std::size_t>(nq * d), 21);
                for (auto& x : q) x *= 4.0f;  // peaked softmax: the maximum's block matters
                const auto kf = random_values<float>(static_cast<std::size_t>(nk * d), 22);
                const auto vf = random_values<float>(static_cast<std::size_t>(nk * d), 23);
                std::vector<std::int8_t> ki(kf.size()), vi(vf.size());
                std::vector<float> ks(static_cast<std::size_t>(nk)), vs(static_cast<std::size_t>(nk));
                std::vector<double> kw(kf.size()), vw(vf.size());
                for (int which = 0; which < 2; ++which) {
                    const auto& f = which ? vf : kf;
                    auto& i8 = which ? vi : ki;
                    auto& sc = which ? vs : ks;
                    auto& w = which ? vw : kw;
                    for (index_t j = 0; j < nk; ++j) {
                        float m = 0;
                        for (index_t c = 0; c < d; ++c) m = std::max(m, std::abs(f[static_cast<std::size_t>(j * d + c)]));
                        sc[static_cast<std::size_t>(j)] = m / 127.0f;
                        for (index_t c = 0; c < d; ++c) {
                            const auto at = static_cast<std::size_t>(j * d + c);
                            i8[at] = static_cast<std::int8_t>(std::nearbyint(f[at] / sc[static_cast<std::size_t>(j)]));
                            w[at] = prec == K::f32 ? f[at] : i8[at] * static_cast<double>(sc[static_cast<std::size_t>(j)]);
                        }
                    }
                }
                auto mat = [&](bool values) {
                    locost::ops::kv_matrix m;
                    m.precision = prec;
                    m.ld = d;
                    m.data = prec == K::f32 ? static_cast<const void*>((values ? vf : kf).data()) : static_cast<const void*>((values ? vi : ki).data());
                    if (prec == K::i8) m.scale = (values ? vs : ks).data();
                    return m;
                };
                // The key bias masks the first 1500 keys (a whole block and part of the next); the
                // bias lifts key 2450 (the last block) for query 0 and masks every key of query 1.
                std::vector<float> key_bias(static_cast<std::size_t>(nk), 0.0f);
                std::fill_n(key_bias.begin(), 1500, neg_inf);
                const index_t bias_rows = bias_form == 0 ? nq : 1;
                std::vector<float> bias = random_values<float>(static_cast<std::size_t>(bias_rows * nk), 24);
                bias[2450] = 25.0f;
                if (bias_form == 0 && nq > 1) std::fill_n(bias.begin() + nk, nk, neg_inf);
                std::vector<float> out(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN());
                auto p = attention_problem_of(q, nq, d, mat(false), mat(true), nk, out);
                p.key_bias = key_bias.data();
                if (bias_form < 2) {
                    p.bias = bias.data();
                    p.ldb = bias_form == 0 ? locost::ops::dense_bias : 0;
                }
                p.products = products;
                locost::ops::attention<locost::cpu, float>({p}, d);
                double worst = 0;
                for (index_t i = 0; i < nq; ++i) {
                    std::vector<double> s(static_cast<std::size_t>(nk));
                    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
                    for (index_t j = 0; j < nk; ++j) {
                        double x = key_bias[static_cast<std::size_t>(j)];
                        if (bias_form < 2) x += bias[static_cast<std::size_t>((bias_form == 0 ? i : 0) * nk + j)];
                        for (index_t c = 0; c < d; ++c) x += static_cast<double>(q[static_cast<std::size_t>(i * d + c)]) * kw[static_cast<std::size_t>(j * d + c)];
                        s[static_cast<std::size_t>(j)] = x;
                        mx = std::max(mx, x);
                    }
                    for (index_t c = 0; c < d; ++c) {
                        double o = 0;
                        if (mx != -std::numeric_limits<double>::infinity()) {
                            sum = 0;
                            for (index_t j = 0; j < nk; ++j) sum += std::exp(s[static_cast<std::size_t>(j)] - mx);
                            for (index_t j = 0; j < nk; ++j) o += std::exp(s[static_cast<std::size_t>(j)] - mx) / sum * vw[static_cast<std::size_t>(j * d + c)];
                        }
                        worst = std::max(worst, std::abs(o - static_cast<double>(out[static_cast<std::size_t>(i * d + c)])));
                    }
                }
                INFO("precision " << static_cast<int>(prec) << " products " << static_cast<int>(products) << " nq " << nq << " bias form " << bias_form
                                  << ": " << worst);
                // int8 products: the queries here are four times the other test's, and so is each
                // score's quantization error (up to ~d/254·max|q|·max|k|): measured up to 0.048.
                CHECK(worst < (products == A::i8 ? 1e-1 : 2e-6));
                if (bias_form == 0 && nq > 1)  // every key of query 1 masked: zeros
                    for (index_t c = 0; c < d; ++c) CHECK(out[static_cast<std::size_t>(d + c)] == 0.0f);
            }
}

namespace {
// The driver side of the caching allocator's tests: malloc under a capacity, with the live
// blocks known so that a leak or a double release shows.
struct counted_driver {
    struct state {
        std::size_t capacity = 0, held = 0, refusals = 0;
        std::map<void*, std::size_t> live;
    };
    state* s = nullptr;
    void* allocate(std::size_t bytes) noexcept {
        if (s->held + bytes > s->capacity) {
            ++s->refusals;
            return nullptr;
        }
        void* p = std::malloc(bytes);
        s->live[p] = bytes;
        s->held += bytes;
        return p;
    }
    void release(void* p) noexcept {
        const auto it = s->live.find(p);
        CHECK(it != s->live.end());  // never a pointer the driver did not give, nor one twice
        if (it == s->live.end()) return;
        s->held -= it->second;
        s->live.erase(it);
        std::free(p);
    }
};
} // namespace

TEST_CASE("threads: flush_denormals sets FTZ/DAZ in the calling thread and every thread of the OpenMP pool") {
    locost::flush_denormals();
    CHECK(locost::denormals_flushed());
    int flushed = 0, threads = 0;
    volatile float tiny = 1e-39f;  // a denormal: read as 0 under DAZ
#pragma omp parallel reduction(+ : flushed, threads)
    {
        ++threads;
        flushed += locost::denormals_flushed() ? 1 : 0;
        flushed += tiny * 1.0f == 0.0f ? 0 : 100;  // DAZ: the denormal input counts as 0
    }
    CHECK(threads == locost::num_threads());
    CHECK(flushed == threads);
}

TEST_CASE("threads: signal_shield blocks the asynchronous signals on the calling thread and the OpenMP pool, never the synchronous ones, and restores the caller") {
    auto blocked = [](int sig) {
        sigset_t now;
        pthread_sigmask(SIG_BLOCK, nullptr, &now);
        return sigismember(&now, sig) == 1;
    };
    REQUIRE_FALSE(blocked(SIGINT));
    {
        const locost::signal_shield shield;
        CHECK(blocked(SIGINT));
        CHECK(blocked(SIGTERM));
        CHECK(blocked(SIGALRM));
        CHECK_FALSE(blocked(SIGSEGV));
        CHECK_FALSE(blocked(SIGFPE));
        int shielded = 0, threads = 0;
#pragma omp parallel reduction(+ : shielded, threads)
        {
            ++threads;
            shielded += blocked(SIGINT) && blocked(SIGCHLD) && !blocked(SIGBUS) ? 1 : 0;
        }
        CHECK(threads == locost::num_threads());
        CHECK(shielded == threads);
    }
    CHECK_FALSE(blocked(SIGINT));
}

TEST_CASE("threads: an interrupt_check stops a parallel loop between pieces, on 1 and 2 threads, and nests") {
    struct stop_now {};
    const int saved = locost::num_threads();
    for (int threads : {1, 2}) {
        CAPTURE(threads);
        locost::set_num_threads(threads);
        for (bool dynamic : {false, true}) {
            CAPTURE(dynamic);
            auto loop = [&](std::int64_t n, auto&& f) {
                if (dynamic) locost::cpu_detail::parallel_for_dynamic(n, [&](std::int64_t i, int) { f(i); });
                else locost::cpu_detail::parallel_for(n, f);
            };
            // A check that never throws: every iteration runs once, and the check ran on thread 0
            // between its iterations (at least one per iteration thread 0 took).
            std::vector<std::atomic<int>> runs(1000);
            int checks = 0;
            {
                const locost::interrupt_check count([&] { ++checks; });
                loop(1000, [&](std::int64_t i) { ++runs[static_cast<std::size_t>(i)]; });
            }
            CHECK(std::all_of(runs.begin(), runs.end(), [](const auto& r) { return r.load() == 1; }));
            if (dynamic) CHECK(checks >= 1);
            else CHECK(checks == 1000 / threads);  // thread 0's share of a static split
            // A check that throws on its 10th call: the exception leaves the loop on the calling
            // thread and the iterations not begun are skipped.
            std::atomic<int> done{0};
            checks = 0;
            {
                const locost::interrupt_check stop([&] {
                    if (++checks == 10) throw stop_now{};
                });
                CHECK_THROWS_AS(loop(1000, [&](std::int64_t) {
                    std::this_thread::sleep_for(std::chrono::microseconds(200));
                    ++done;
                }),
                                stop_now);
            }
            CHECK(checks == 10);
            CHECK(done.load() < 1000);
            CHECK(done.load() >= 9);
            // Loops inside a loop's body run serially and do not check (an exception must not
            // leave a parallel region); the outer loop still stops.
            checks = 0;
            std::atomic<int> inner{0};
            {
                const locost::interrupt_check stop([&] {
                    if (++checks == 5) throw stop_now{};
                });
                CHECK_THROWS_AS(loop(100, [&](std::int64_t) { locost::cpu_detail::parallel_for(10, [&](std::int64_t) { ++inner; }); }), stop_now);
            }
            CHECK(inner.load() % 10 == 0);
            // Without a check, and once the check is gone, nothing is polled.
            CHECK_FALSE(locost::interrupt_check::installed());
            loop(10, [&](std::int64_t) {});
        }
    }
    // Checks nest: the inner one is in force until it goes, then the outer one again.
    std::string seen;
    {
        const locost::interrupt_check outer([&] { seen += 'o'; });
        {
            const locost::interrupt_check inner([&] { seen += 'i'; });
            locost::interrupt_check::poll();
        }
        locost::interrupt_check::poll();
    }
    locost::interrupt_check::poll();
    CHECK(seen == "io");
    locost::set_num_threads(saved);
}

TEST_CASE("block_cache: rounding, reuse per stream, the waste limit, release on refusal, peaks, caching off") {
    using cache_t = locost::detail::block_cache<counted_driver>;
    constexpr std::size_t MiB = std::size_t{1} << 20;
    CHECK(cache_t::rounded(1) == 512);
    CHECK(cache_t::rounded(512) == 512);
    CHECK(cache_t::rounded(513) == 1024);
    CHECK(cache_t::rounded(MiB) == MiB);
    CHECK(cache_t::rounded(4097) == 4608);
    CHECK(cache_t::rounded(MiB + 1) == MiB + MiB / 8);            // eight classes per octave
    CHECK(cache_t::rounded(17 * MiB) == 18 * MiB);                // 2 MiB steps from 16 MiB to 32 MiB
    CHECK(cache_t::rounded(100'000'000) == 12 * 8 * MiB);         // 64 MiB / 8 = 8 MiB steps
    for (std::size_t b = 1; b < 64 * MiB; b = b * 3 + 7) {         // never more than 1/8 (or 511 bytes) added
        CHECK(cache_t::rounded(b) >= b);
        CHECK(cache_t::rounded(b) <= b + std::max<std::size_t>(b / 8, 511));
    }
    CHECK(cache_t::rounded(3 * (std::size_t{1} << 30)) == 3 * (std::size_t{1} << 30));  // a multiple of 256 MiB stays

    counted_driver::state d;
    d.capacity = 64 * MiB;
    int stream_a = 0, stream_b = 0;
    {
        cache_t cache(counted_driver{&d});
        void* p = cache.allocate(1000, &stream_a);
        REQUIRE(p != nullptr);
        CHECK(d.held == 1024);
        cache.free(p);
        CHECK(d.held == 1024);  // kept
        CHECK(cache.stats().cached == 1024);
        CHECK(cache.allocate(900, &stream_a) == p);  // same stream, same class: reused
        CHECK(cache.stats().reuses == 1);
        void* q = cache.allocate(900, &stream_b);  // another stream never gets a block in use or cached by a
        CHECK(q != p);
        cache.free(p);
        void* r = cache.allocate(600, &stream_b);  // stream_a's free block is not stream_b's
        CHECK(r != p);
        CHECK(cache.stats().driver_allocations == 3);
        cache.free(q);
        cache.free(r);

        // The waste limit: a free 10 MiB block does not serve 2 MiB, but serves 9 MiB.
        void* big = cache.allocate(10 * MiB, &stream_a);
        cache.free(big);
        void* small = cache.allocate(2 * MiB, &stream_a);
        CHECK(small != big);
        CHECK(cache.allocate(9 * MiB, &stream_a) == big);
        cache.free(small);
        cache.free(big);
        const auto before = cache.stats();
        CHECK(before.in_use == 0);
        CHECK(before.reserved == d.held);
        CHECK(before.cached == d.held);
        CHECK(before.peak_reserved == 3 * 1024 + 12 * MiB);

        // A request the driver refuses while blocks are cached: they go back and it is tried again.
        cache.reset_peaks();
        void* huge = cache.allocate(60 * MiB, &stream_b);
        REQUIRE(huge != nullptr);
        CHECK(d.refusals == 1);
        CHECK(cache.stats().releases == 1);
        CHECK(cache.stats().cached == 0);
        CHECK(d.held == 60 * MiB);
        CHECK(cache.stats().peak_reserved == 60 * MiB);
        // One the driver refuses with nothing cached: nullptr, and nothing changes.
        CHECK(cache.allocate(8 * MiB, &stream_b) == nullptr);
        CHECK(cache.stats().in_use == 60 * MiB);
        cache.free(huge);

        // A destroyed stream's blocks go back; other streams' stay.
        void* a1 = cache.allocate(4096, &stream_a);
        void* b1 = cache.allocate(4096, &stream_b);
        cache.free(a1);
        cache.free(b1);
        cache.release_stream(&stream_b);
        CHECK(cache.stats().cached == 4096);
        CHECK(d.held == 4096);
        CHECK(d.live.count(a1) == 1);
        // A live block of a destroyed stream goes back to the driver when freed, not to a list a
        // new stream at the same address would take from.
        void* b2 = cache.allocate(4096, &stream_b);
        void* a2 = cache.allocate(8192, &stream_a);
        CHECK(cache.stream_of(b2) == &stream_b);
        CHECK(cache.stream_of(a2) == &stream_a);
        CHECK(cache.stream_of(&stream_a) == nullptr);
        cache.release_stream(&stream_b);
        CHECK(d.live.count(b2) == 1);  // live: still the caller's
        CHECK(cache.stream_of(b2) == nullptr);
        cache.free(b2);
        CHECK(d.live.count(b2) == 0);
        CHECK(cache.stats().cached == 4096);
        cache.free(a2);
        CHECK(cache.stats().cached == 4096 + 8192);
        CHECK(cache.stats().reserved == d.held);
        cache.free(nullptr);
        int foreign = 0;
        cache.free(&foreign);  // not the cache's: ignored, not given to the driver
        CHECK(cache.allocate(0, &stream_a) == nullptr);
    }
    CHECK(d.live.empty());  // the cache's destructor gave back what it kept

    // Caching off: every free is the driver's free, sizes are not rounded.
    {
        cache_t plain(counted_driver{&d}, false);
        void* p = plain.allocate(1000, &stream_a);
        CHECK(d.held == 1000);
        plain.free(p);
        CHECK(d.live.empty());
        CHECK(plain.stats().reserved == 0);
        CHECK(plain.stats().peak_reserved == 1000);
    }
}
