// The CPU backend's attention op (backend/cpu/attention*.hpp) against a softmax in double over
// the stored values: float32, bfloat16 and int8 keys and values, the fused few-row, blocked,
// shared-key and online-softmax paths, and which path each problem takes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <locost/locost.hpp>
#include <string>
#include <vector>

#include "backend/cpu/random_values.hpp"
#include "helpers.hpp"

namespace {

// One attention problem: nq queries of width d (rows d apart) over nk keys and values, into out.
locost::ops::attention_problem<float> attention_problem_of(const std::vector<float>& q, locost::index_t nq, locost::index_t d,
                                                           const locost::ops::kv_matrix& k, const locost::ops::kv_matrix& v,
                                                           locost::index_t nk, std::vector<float>& out) {
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

// The path kernel<attention_op, cpu> takes for p, by name (the table in backend/cpu/attention.hpp).
template <class T>
std::string cpu_attention_path(const locost::ops::attention_problem<T>& p, locost::index_t d) {
    return locost::cpu_detail::attention_path_name(locost::cpu_detail::attention_path_of(p, d));
}

// Whether the few-row kernels take nq query rows of width d: the table's condition (fusable),
// restated: 1-4 rows, d two, four or eight vectors, at most 16 vectors of queries in all.
bool few_row_shape(locost::index_t nq, locost::index_t d) {
    const locost::index_t fl = locost::cpu_detail::level_flanes();
    return nq >= 1 && nq <= 4 && (d == 2 * fl || d == 4 * fl || d == 8 * fl) && d / fl * nq <= 16;
}

// Whether the int8 (VNNI) and bfloat16 dot-product tiles run at this process's level (isa.hpp).
bool vnni_tiles() { return LOCOST_ISA_REGIONS && locost::kernels_isa() >= locost::isa_level::avx512_vnni; }
bool bf16_tiles() { return LOCOST_ISA_REGIONS && locost::cpu_detail::bf16_dot_products(); }

}  // namespace

TEST_CASE(
    "attention: bfloat16 and int8 keys/values, fused (1-4 query rows), blocked and shared-key paths (exact, and with bfloat16 and int8 products), equal a softmax over the widened values") {
    using locost::index_t;
    using K = locost::ops::kv_precision;
    for (K prec : {K::f32, K::bf16, K::i8})
        for (index_t d : {64, 32, 128, 48, 24})
            for (index_t nq : {1, 2, 3, 4, 5})
                for (index_t nk : {1, 7, 300, 600, 2500}) {  // 2500: blocks of keys with an online softmax
                    const index_t ld = d + 8;                // keys/values in a wider row, as the cache's interleaved layout
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
                                w[at] = prec == K::f32 ? f[at]
                                    : prec == K::bf16  ? locost::bf16_to_float(b[at])
                                                       : i8[at] * static_cast<double>(sc[static_cast<std::size_t>(j)]);
                            }
                        }
                    auto mat = [&](bool values) {
                        locost::ops::kv_matrix m;
                        m.precision = prec;
                        m.ld = ld;
                        m.data = prec == K::f32 ? static_cast<const void*>((values ? vf : kf).data())
                            : prec == K::bf16   ? static_cast<const void*>((values ? vb : kb).data())
                                                : static_cast<const void*>((values ? vi : ki).data());
                        if (prec == K::i8) m.scale = (values ? vs : ks).data();
                        return m;
                    };
                    std::vector<float> out(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN());
                    const auto p = attention_problem_of(q, nq, d, mat(false), mat(true), nk, out);
                    // The path (backend/cpu/attention.hpp's table): the few-row kernels for 1-4 rows of
                    // their widths, by blocks of keys (online) over more than online_block of them;
                    // other shapes generic.
                    const std::string path = cpu_attention_path(p, d);
                    CAPTURE(path);
                    CHECK(path == (few_row_shape(nq, d) ? (nk > locost::cpu_detail::online_block ? "online" : "few_rows") : "generic"));
                    locost::ops::attention<locost::cpu, float>({p}, d);
                    // max |o − softmax(q·Kᵀ)·V| over the values each storage holds, in double
                    auto error_of = [&](const std::vector<float>& o_got, const std::vector<double>& values) {
                        double worst = 0;
                        for (index_t i = 0; i < nq; ++i) {
                            std::vector<double> sc(static_cast<std::size_t>(nk));
                            double mx = -1e300, sum = 0;
                            for (index_t j = 0; j < nk; ++j) {
                                double s = 0;
                                for (index_t c = 0; c < d; ++c)
                                    s += static_cast<double>(q[static_cast<std::size_t>(i * d + c)]) *
                                        kw[static_cast<std::size_t>(j * ld + c)];
                                sc[static_cast<std::size_t>(j)] = s;
                                mx = std::max(mx, s);
                            }
                            for (auto& s : sc) sum += (s = std::exp(s - mx));
                            for (index_t c = 0; c < d; ++c) {
                                double o = 0;
                                for (index_t j = 0; j < nk; ++j)
                                    o += sc[static_cast<std::size_t>(j)] / sum * values[static_cast<std::size_t>(j * ld + c)];
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
                        if (bf16_tiles() && d % 32 == 0 && nk > 1) CHECK(e > 1e-5);  // the bfloat16 tiles ran, not the exact path
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
                        const std::string path_i8 = cpu_attention_path(pi, d);
                        CAPTURE(path_i8);
                        INFO("int8 products over the cache, d " << d << " nq " << nq << " nk " << nk << ": " << e);
                        CHECK(e < 3e-2);  // the folded form's bound (below)
                        if (vnni_tiles() && d % 64 == 0 && nq <= 4) {
                            CHECK(path_i8 == "online");   // cache_i8's blocks of keys
                            if (nk > 1) CHECK(e > 1e-5);  // the int8 tiles ran, not the exact kernels (one key: p = 1, exact)
                        } else {
                            CHECK(path_i8 == path);
                            CHECK(c8 == out);  // other shapes and levels: the exact path, unchanged
                        }
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
                        CHECK(e < 3e-2);                                             // measured: up to 0.012 (bfloat16 products: 0.009)
                        if (vnni_tiles() && d % 16 == 0 && nk > 1) CHECK(e > 1e-5);  // the VNNI tiles ran, not the exact path
                    }
                    INFO("precision " << static_cast<int>(prec) << " d " << d << " nq " << nq << " nk " << nk);
                    CHECK(worst < 2e-6);
                }
}

TEST_CASE(
    "attention: many queries over float32 keys in bfloat16 products (the dense encoders under compute = bf16 or int8): a position bias, masked keys, a fully masked row") {
    // What the products are: q, k, the softmax's exponentials and v rounded to bfloat16, float32 sums
    // (oneDNN's matmul; rows and keys padded to multiples of 64 inside). Checked against a double
    // softmax over the unrounded values, with a Toeplitz bias (as T5's relative bias) and a key
    // bias that masks keys 3-5 of every row; then a row whose every key is masked (zeros, as the
    // exact path gives).
    using locost::index_t;
    const float inf = std::numeric_limits<float>::infinity();
    // The path these problems take with bfloat16 or int8 products (backend/cpu/attention.hpp's
    // table): bf16 where oneDNN is built in (chosen: where it has no bfloat16 matmul the problem
    // is then solved as generic, see bf16_ran below), else generic; exact products: generic.
#if defined(LOCOST_USE_ONEDNN)
    const std::string bf16_path = "bf16";
#else
    const std::string bf16_path = "generic";
#endif
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
                            double s =
                                static_cast<double>(band[static_cast<std::size_t>(nq - 1 + j - i)]) + key_bias[static_cast<std::size_t>(j)];
                            for (index_t c = 0; c < d; ++c)
                                s += static_cast<double>(q[static_cast<std::size_t>(i * ldq + c)]) *
                                    kv[static_cast<std::size_t>(j * ld + c)];
                            sc[static_cast<std::size_t>(j)] = s;
                            mx = std::max(mx, s);
                        }
                        for (auto& s : sc) sum += (s = std::exp(s - mx));
                        for (index_t c = 0; c < d; ++c) {
                            double o = 0;
                            for (index_t j = 0; j < nk; ++j)
                                o += sc[static_cast<std::size_t>(j)] / sum * kv[static_cast<std::size_t>(j * ld + 2 * d + c)];
                            worst = std::max(worst, std::abs(o - static_cast<double>(got[static_cast<std::size_t>(i * d + c)])));
                        }
                    }
                    return worst;
                };
                using A = locost::ops::attention_products;
                std::vector<float> exact(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN()), b16(exact), i8(exact);
                CHECK(cpu_attention_path(problem(exact, A::exact), d) == "generic");
                CHECK(cpu_attention_path(problem(b16, A::bf16), d) == bf16_path);
                CHECK(cpu_attention_path(problem(i8, A::i8), d) == bf16_path);
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
#if defined(LOCOST_USE_ONEDNN)
                if (locost::cpu_isa() >= locost::isa_level::avx512) CHECK(e > 1e-5);  // oneDNN's bfloat16 matmul ran, not the exact path
#endif
            }
    // A row whose every key is masked gives zeros, as the exact path does.
    const index_t d = 64, nq = 32, nk = 70;
    const auto q = random_values<float>(static_cast<std::size_t>(nq * d), 31);
    const auto kv = random_values<float>(static_cast<std::size_t>(nk * d), 32);
    std::vector<float> bias(static_cast<std::size_t>(nq * nk), 0.0f);
    for (index_t j = 0; j < nk; ++j) bias[static_cast<std::size_t>(5 * nk + j)] = -inf;  // row 5: nothing to attend to
    std::vector<float> out(static_cast<std::size_t>(nq * d), std::numeric_limits<float>::quiet_NaN()), exact(out);
    auto p =
        attention_problem_of(q, nq, d, locost::layers::native_rows(kv.data(), d), locost::layers::native_rows(kv.data(), d), nk, exact);
    p.bias = bias.data();
    p.ldb = locost::ops::dense_bias;
    CHECK(cpu_attention_path(p, d) == "generic");
    locost::ops::attention<locost::cpu, float>({p}, d);
    p.out = out.data();
    p.products = locost::ops::attention_products::bf16;
    CHECK(cpu_attention_path(p, d) == bf16_path);
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
    MESSAGE("bfloat16 products through oneDNN on this CPU: " << std::string(bf16_ran ? "yes" : "no (the exact path runs)"));
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
                CHECK(cpu_attention_path(b, d) == bf16_path);
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
            for (std::size_t i = 0; i < together.size(); ++i)
                apart = std::max(apart, std::abs(static_cast<double>(together[i]) - alone[i]));
            CHECK(apart < 1e-4);
        }
    }
    locost::set_num_threads(saved);
}

TEST_CASE(
    "attention: a few queries over a long cache go by blocks of keys (online softmax), exact and in int8 products: biases, masked blocks, a late maximum, a fully masked row") {
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
                    m.data = prec == K::f32 ? static_cast<const void*>((values ? vf : kf).data())
                                            : static_cast<const void*>((values ? vi : ki).data());
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
                // The path (backend/cpu/attention.hpp's table): blocks of keys (2600 > online_block)
                // where the few-row kernels take the shape, or cache_i8 the int8 products; other
                // shapes (3-4 rows of 64 where a vector is 8 floats: more than 16 vectors) generic.
                const bool cache_i8_takes = products == A::i8 && vnni_tiles();
                const std::string path = cpu_attention_path(p, d);
                CAPTURE(path);
                CHECK(path == ((few_row_shape(nq, d) || cache_i8_takes) ? "online" : "generic"));
                locost::ops::attention<locost::cpu, float>({p}, d);
                double worst = 0;
                for (index_t i = 0; i < nq; ++i) {
                    std::vector<double> s(static_cast<std::size_t>(nk));
                    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
                    for (index_t j = 0; j < nk; ++j) {
                        double x = key_bias[static_cast<std::size_t>(j)];
                        if (bias_form < 2) x += bias[static_cast<std::size_t>((bias_form == 0 ? i : 0) * nk + j)];
                        for (index_t c = 0; c < d; ++c)
                            x += static_cast<double>(q[static_cast<std::size_t>(i * d + c)]) * kw[static_cast<std::size_t>(j * d + c)];
                        s[static_cast<std::size_t>(j)] = x;
                        mx = std::max(mx, x);
                    }
                    for (index_t c = 0; c < d; ++c) {
                        double o = 0;
                        if (mx != -std::numeric_limits<double>::infinity()) {
                            sum = 0;
                            for (index_t j = 0; j < nk; ++j) sum += std::exp(s[static_cast<std::size_t>(j)] - mx);
                            for (index_t j = 0; j < nk; ++j)
                                o += std::exp(s[static_cast<std::size_t>(j)] - mx) / sum * vw[static_cast<std::size_t>(j * d + c)];
                        }
                        worst = std::max(worst, std::abs(o - static_cast<double>(out[static_cast<std::size_t>(i * d + c)])));
                    }
                }
                INFO("precision " << static_cast<int>(prec) << " products " << static_cast<int>(products) << " nq " << nq << " bias form "
                                  << bias_form << ": " << worst);
                // int8 products: the queries here are four times the other test's, and so is each
                // score's quantization error (up to ~d/254·max|q|·max|k|): measured up to 0.048.
                CHECK(worst < (products == A::i8 ? 1e-1 : 2e-6));
                if (bias_form == 0 && nq > 1)  // every key of query 1 masked: zeros
                    for (index_t c = 0; c < d; ++c) CHECK(out[static_cast<std::size_t>(d + c)] == 0.0f);
            }
}

TEST_CASE("attention: the CPU path each problem takes (backend/cpu/attention.hpp's table), as attention_path_of names it") {
    // The conditions of the table, problem by problem, in this build: the few-row kernels, blocks
    // of keys with an online softmax, bfloat16 products through oneDNN, the generic path. What
    // depends on the build and the level (isa.hpp) follows the dispatcher's own condition: the
    // vector width at the level (level_flanes), avx512-vnni (cache_i8), LOCOST_USE_ONEDNN (bf16).
    using locost::index_t;
    using K = locost::ops::kv_precision;
    using A = locost::ops::attention_products;
    const index_t fl = locost::cpu_detail::level_flanes(), block = locost::cpu_detail::online_block;
    const bool cache_i8 = LOCOST_ISA_REGIONS && locost::kernels_isa() >= locost::isa_level::avx512_vnni;
#if defined(LOCOST_USE_ONEDNN)
    const std::string bf16_path = "bf16";
#else
    const std::string bf16_path = "generic";
#endif
    const index_t max_nq = 100, max_d = std::max<index_t>(8 * fl, 128), max_nk = 3000;
    const auto q = random_values<float>(static_cast<std::size_t>(max_nq * max_d), 51);
    const auto kf = random_values<float>(static_cast<std::size_t>(max_nk * max_d), 52);
    std::vector<std::uint16_t> kb(kf.size());
    std::vector<std::int8_t> ki(kf.size());
    for (std::size_t i = 0; i < kf.size(); ++i) {
        kb[i] = locost::float_to_bf16(kf[i]);
        ki[i] = static_cast<std::int8_t>(std::nearbyint(kf[i] * 127.0f));
    }
    const std::vector<float> scales(static_cast<std::size_t>(max_nk), 1.0f / 127.0f);
    std::vector<float> out(static_cast<std::size_t>(max_nq * max_d));
    // nq queries of width d over nk keys and values (the same matrix) stored in prec
    auto problem = [&](K prec, index_t nq, index_t d, index_t nk, A products) {
        locost::ops::kv_matrix m;
        m.precision = prec;
        m.ld = d;
        m.data = prec == K::bf16 ? static_cast<const void*>(kb.data())
            : prec == K::i8      ? static_cast<const void*>(ki.data())
                                 : static_cast<const void*>(kf.data());
        if (prec == K::i8) m.scale = scales.data();
        auto p = attention_problem_of(q, nq, d, m, m, nk, out);
        p.products = products;
        return p;
    };
    auto second_segment = [](locost::ops::attention_problem<float> p) {
        p.k2 = p.k;
        p.v2 = p.v;
        p.nk2 = 10;
        return p;
    };
    // few_rows: 1-4 query rows of 2, 4 or 8 vectors (16 vectors of queries at most) over any
    // cache, up to online_block keys, or more with a second segment; online beyond, without one.
    for (K prec : {K::native, K::f32, K::bf16, K::i8})
        for (index_t nq : {1, 2, 3, 4})
            for (index_t d : {2 * fl, 4 * fl, 8 * fl}) {
                CAPTURE(static_cast<int>(prec));
                CAPTURE(nq);
                CAPTURE(d);
                const bool fits = d / fl * nq <= 16;
                CHECK(cpu_attention_path(problem(prec, nq, d, 300, A::exact), d) == (fits ? "few_rows" : "generic"));
                CHECK(cpu_attention_path(problem(prec, nq, d, block, A::exact), d) == (fits ? "few_rows" : "generic"));
                CHECK(cpu_attention_path(problem(prec, nq, d, block + 1, A::exact), d) == (fits ? "online" : "generic"));
                CHECK(cpu_attention_path(second_segment(problem(prec, nq, d, block + 1, A::exact)), d) == (fits ? "few_rows" : "generic"));
                // products asked for a few rows: bfloat16 products need 16 rows, int8 ones an int8 cache
                if (prec != K::i8) CHECK(cpu_attention_path(problem(prec, nq, d, 300, A::i8), d) == (fits ? "few_rows" : "generic"));
                CHECK(cpu_attention_path(problem(prec, nq, d, 300, A::bf16), d) == (fits ? "few_rows" : "generic"));
            }
    // online through cache_i8: int8 products over an int8 cache with scales, 1-4 rows, d a
    // multiple of 64, no second segment; elsewhere such problems go as exact ones would.
    for (index_t nq : {1, 2, 3, 4, 5})
        for (index_t d : {64, 128, 48}) {
            CAPTURE(nq);
            CAPTURE(d);
            const std::string exact = few_row_shape(nq, d) ? "few_rows" : "generic";
            const bool takes = cache_i8 && nq <= 4 && d % 64 == 0;
            CHECK(cpu_attention_path(problem(K::i8, nq, d, 300, A::exact), d) == exact);
            CHECK(cpu_attention_path(problem(K::i8, nq, d, 300, A::i8), d) == (takes ? "online" : exact));
            CHECK(cpu_attention_path(second_segment(problem(K::i8, nq, d, 300, A::i8)), d) == exact);
        }
    // bf16: 16 or more rows over float32 keys and values read where they lie, products other
    // than exact, some keys, no second segment; chosen in a oneDNN build.
    for (K prec : {K::native, K::f32})
        for (A products : {A::bf16, A::i8})
            for (index_t nq : {16, 17, 100})
                for (index_t d : {64, 48, 8}) {
                    CAPTURE(static_cast<int>(prec));
                    CAPTURE(static_cast<int>(products));
                    CAPTURE(nq);
                    CAPTURE(d);
                    CHECK(cpu_attention_path(problem(prec, nq, d, 300, products), d) == bf16_path);
                    CHECK(cpu_attention_path(problem(prec, nq, d, 1, products), d) == bf16_path);
                    CHECK(cpu_attention_path(problem(prec, nq, d, 300, A::exact), d) == "generic");
                    CHECK(cpu_attention_path(problem(prec, nq, d, 0, products), d) == "generic");
                    CHECK(cpu_attention_path(second_segment(problem(prec, nq, d, 300, products)), d) == "generic");
                }
    CHECK(cpu_attention_path(problem(K::f32, 15, 64, 300, A::bf16), 64) == "generic");   // fewer than 16 rows
    CHECK(cpu_attention_path(problem(K::bf16, 16, 64, 300, A::bf16), 64) == "generic");  // a bfloat16 cache
    CHECK(cpu_attention_path(problem(K::i8, 16, 64, 300, A::i8), 64) == "generic");      // an int8 cache
    auto mixed = problem(K::f32, 16, 64, 300, A::bf16);
    mixed.v = problem(K::bf16, 16, 64, 300, A::bf16).v;
    CHECK(cpu_attention_path(mixed, 64) == "generic");  // values not read where they lie
    // generic: 5 rows or more (below 16, or with exact products), widths other than 2, 4 or 8
    // vectors, no rows; and every double problem.
    CHECK(cpu_attention_path(problem(K::f32, 5, 4 * fl, 300, A::exact), 4 * fl) == "generic");
    CHECK(cpu_attention_path(problem(K::f32, 5, 4 * fl, max_nk, A::exact), 4 * fl) == "generic");
    CHECK(cpu_attention_path(problem(K::f32, 1, 4 * fl + 1, 300, A::exact), 4 * fl + 1) == "generic");
    CHECK(cpu_attention_path(problem(K::f32, 1, 3 * fl, max_nk, A::exact), 3 * fl) == "generic");
    CHECK(cpu_attention_path(problem(K::f32, 0, 4 * fl, 300, A::exact), 4 * fl) == "generic");
    const std::vector<double> qd(static_cast<std::size_t>(4 * fl), 0.5), kd(static_cast<std::size_t>(max_nk * 4 * fl), 0.25);
    std::vector<double> outd(qd.size());
    locost::ops::attention_problem<double> pd;
    pd.q = qd.data();
    pd.nq = 1;
    pd.ldq = 4 * fl;
    pd.k = pd.v = locost::layers::native_rows(kd.data(), 4 * fl);
    pd.nk = max_nk;
    pd.out = outd.data();
    pd.ldo = 4 * fl;
    CHECK(cpu_attention_path(pd, 4 * fl) == "generic");
    pd.nk = 300;
    CHECK(cpu_attention_path(pd, 4 * fl) == "generic");
}
