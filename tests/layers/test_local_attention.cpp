// Local attention (layers/local_attention.hpp, layers/sliding_window_attention.hpp, the layers of
// LongT5, LED and Pegasus-X) against a dense softmax over the allowed keys, and LongT5's attention
// layers against the original LOCOST code's. (It compiles with tests/models: hf_reference.hpp.)
#include "models/hf_reference.hpp"

#include <type_traits>

namespace {

// The simple reference: for every query, a dense softmax over the keys allowed(b, i, j) (plus
// the global keys of its row), in double.
template <class Allowed>
std::vector<double> naive_local(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v, index_t B,
                                index_t L, index_t heads, index_t d, const Allowed& allowed, const std::vector<double>& gk = {},
                                const std::vector<double>& gv = {}, index_t G = 0) {
    const index_t I = heads * d;
    std::vector<double> out(static_cast<std::size_t>(B * L * I), 0.0);
    for (index_t b = 0; b < B; ++b)
        for (index_t h = 0; h < heads; ++h)
            for (index_t i = 0; i < L; ++i) {
                std::vector<std::pair<double, const double*>> s;
                auto dot = [&](const double* a, const double* c) {
                    double t = 0;
                    for (index_t x = 0; x < d; ++x) t += a[x] * c[x];
                    return t;
                };
                const double* qi = q.data() + (b * L + i) * I + h * d;
                for (index_t j = 0; j < L; ++j)
                    if (allowed(b, i, j)) s.push_back({dot(qi, k.data() + (b * L + j) * I + h * d), v.data() + (b * L + j) * I + h * d});
                for (index_t j = 0; j < G; ++j)
                    s.push_back({dot(qi, gk.data() + (b * G + j) * I + h * d), gv.data() + (b * G + j) * I + h * d});
                double m = -1e300, z = 0;
                for (auto& e : s) m = std::max(m, e.first);
                for (auto& e : s) z += std::exp(e.first - m);
                double* o = out.data() + (b * L + i) * I + h * d;
                for (auto& e : s)
                    for (index_t x = 0; x < d; ++x) o[x] += std::exp(e.first - m) / z * e.second[x];
            }
    return out;
}

std::vector<double> random_vector(std::size_t n, std::uint64_t seed) {
    std::vector<double> v(n);
    std::uint64_t s = seed;
    for (auto& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = static_cast<double>((s >> 11) % 2000001) / 1e6 - 1.0;
    }
    return v;
}

}  // namespace

TEST_CASE("local attention: a mask without padding adds no key bias; with padding, -inf at the padded keys") {
    namespace L_ = locost::layers;
    std::vector<float> ones(10, 1.0f), padded(10, 1.0f);
    padded[7] = 0.0f;
    L_::padding_bias<float, cpu> b;
    b.prepare(ones.data(), 10);
    CHECK(b.data() == nullptr);                   // no pass over the scores for nothing
    b.prepare(ones.data(), 10, /*always=*/true);  // a caller that masks more keys itself gets zeros
    REQUIRE(b.data() != nullptr);
    CHECK(std::all_of(b.data(), b.data() + 10, [](float x) { return x == 0.0f; }));
    b.prepare(padded.data(), 10);
    REQUIRE(b.data() != nullptr);
    CHECK(b.data()[6] == 0.0f);
    CHECK(b.data()[7] == -std::numeric_limits<float>::infinity());
    b.prepare(nullptr, 10);
    CHECK(b.data() == nullptr);
}

TEST_CASE_TEMPLATE("local attention: sliding windows, blocks and global keys equal a dense softmax over the allowed keys", C,
                   LOCOST_CONFIGS) {
    using S = typename C::scalar;
    namespace L_ = locost::layers;
    const index_t B = 2, L = 61, heads = 2, d = 8, I = heads * d, G = 3;
    const auto q = random_vector(static_cast<std::size_t>(B * L * I), 1), k = random_vector(static_cast<std::size_t>(B * L * I), 2),
               v = random_vector(static_cast<std::size_t>(B * L * I), 3), gk = random_vector(static_cast<std::size_t>(B * G * I), 4),
               gv = random_vector(static_cast<std::size_t>(B * G * I), 5);
    auto to_s = [](const std::vector<double>& x) { return std::vector<S>(x.begin(), x.end()); };
    const auto qs = to_s(q), ks = to_s(k), vs = to_s(v), gks = to_s(gk), gvs = to_s(gv);
    // Row 1 has 45 valid positions: its padded keys are masked.
    std::vector<float> mask(static_cast<std::size_t>(B * L), 1.0f);
    for (index_t i = 45; i < L; ++i) mask[static_cast<std::size_t>(L + i)] = 0.0f;
    L_::padding_bias<S, cpu> key_bias;
    key_bias.prepare(mask.data(), B * L);
    auto valid = [&](index_t b, index_t j) { return mask[static_cast<std::size_t>(b * L + j)] != 0.0f; };
    const L_::local_qkv<S> in{qs.data(), ks.data(), vs.data(), I, I, I};
    const double tol = std::is_same_v<S, float> ? 1e-5 : 1e-12;
    auto run = [&](const auto& window, index_t query_block, bool globals) {
        L_::global_segment<S> seg;
        if (globals) seg = {gks.data(), gvs.data(), I, G * I, {G, G}};
        // A sliding window's mask is a band over the distances a query group meets; blocks need none.
        L_::position_band<S, cpu> band;
        constexpr bool sliding = std::is_same_v<std::remove_cvref_t<decltype(window)>, L_::sliding_window>;
        if constexpr (sliding)
            band.ensure(window.max_distance(query_block) + 1, 0,
                        [&](index_t r, index_t) { return window.within(r) ? 0.0f : L_::position_band<S, cpu>::masked; });
        std::vector<S> out(static_cast<std::size_t>(B * L * I));
        L_::local_attention<S, cpu>(in, B, L, heads, d, window, query_block, key_bias.data(), sliding ? &band : nullptr, seg, {},
                                    out.data(), I);
        return out;
    };
    auto compare = [&](const std::vector<S>& ours, const std::vector<double>& want) {
        double worst = 0;
        for (index_t b = 0; b < B; ++b)
            for (index_t i = 0; i < L; ++i)
                if (valid(b, i))
                    for (index_t x = 0; x < I; ++x) {
                        const std::size_t at = static_cast<std::size_t>((b * L + i) * I + x);
                        worst = std::max(worst, std::abs(static_cast<double>(ours[at]) - want[at]));
                    }
        return worst;
    };
    for (index_t r : {0, 1, 5, 13, 60, 100}) {
        CAPTURE(r);
        const auto want =
            naive_local(q, k, v, B, L, heads, d, [&](index_t b, index_t i, index_t j) { return valid(b, j) && std::abs(i - j) <= r; });
        const auto want_g = naive_local(
            q, k, v, B, L, heads, d, [&](index_t b, index_t i, index_t j) { return valid(b, j) && std::abs(i - j) <= r; }, gk, gv, G);
        // Blockwise with overlap (LongT5's blocks of r + 1 against their neighbours) is the
        // sliding window of radius r: any query grouping gives the same numbers.
        for (index_t qb : {index_t{1}, r + 1, index_t{7}, index_t{64}}) {
            CAPTURE(qb);
            CHECK(compare(run(L_::sliding_window{r}, qb, false), want) < tol);
            CHECK(compare(run(L_::sliding_window{r}, qb, true), want_g) < tol);
        }
    }
    // A window covering the whole input is dense attention.
    const auto dense = naive_local(q, k, v, B, L, heads, d, [&](index_t b, index_t, index_t j) { return valid(b, j); });
    CHECK(compare(run(L_::sliding_window{L}, 16, false), dense) < tol);
    CHECK(compare(run(L_::disjoint_blocks{L, 0}, 16, false), dense) < tol);
    // Disjoint blocks, plain and shifted by half a block (Pegasus-X's staggered layers).
    for (index_t blk : {1, 4, 16, 25})
        for (index_t shift : {index_t{0}, blk / 2}) {
            CAPTURE(blk);
            CAPTURE(shift);
            const L_::disjoint_blocks w{blk, shift};
            const auto want = naive_local(
                q, k, v, B, L, heads, d, [&](index_t b, index_t i, index_t j) { return valid(b, j) && w.start_of(i) == w.start_of(j); }, gk,
                gv, G);
            CHECK(compare(run(w, 64, true), want) < tol);
            CHECK(compare(run(w, 3, true), want) < tol);
        }
}

TEST_CASE_TEMPLATE("longt5 attention layers equal the original LOCOST code's (local r127, r31, transient-global, dense)", C,
                   LOCOST_CONFIGS) {
    using S = typename C::scalar;
    namespace L_ = locost::layers;
    const reference ref(reference_dir + "/longt5_attention.safetensors");
    const index_t B = 2, L = 300, H = 64, heads = 4;
    const auto input = ref.floats("attn.input");
    const std::vector<S> u(input.begin(), input.end());
    const auto mask_f = ref.floats("attn.mask");
    std::vector<bool> keep(static_cast<std::size_t>(B * L * H));
    for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = mask_f[i / static_cast<std::size_t>(H)] != 0.0f;
    auto tensor_of = [&](const std::string& name) {
        const auto& r = ref.record(name);
        locost::tensor<float> t(r.shape);
        const auto f = ref.floats(name);
        std::copy(f.begin(), f.end(), t.data());
        return t;
    };
    auto check_case = [&](const std::string& name, index_t radius, index_t global_block, auto transient) {
        CAPTURE(name);
        constexpr bool TG = decltype(transient)::value;
        const std::string w = "attn." + name + ".weights.";
        using layer_t = L_::sliding_window_attention<S, cpu, TG>;
        typename layer_t::weights a;
        a.attention.norm = locost::tensor<float>({H});
        std::fill_n(a.attention.norm.data(), H, 1.0f);
        a.attention.p.q = tensor_of(w + "q.weight");
        a.attention.p.k = tensor_of(w + "k.weight");
        a.attention.p.v = tensor_of(w + "v.weight");
        a.attention.p.o = tensor_of(w + "o.weight");
        if (TG) a.global_norm = tensor_of(w + "global_input_layer_norm.weight");
        const layer_t layer(a, 1e-6, heads);
        typename layer_t::inputs::tables tables;
        tables.rel = tensor_of(w + "relative_attention_bias.weight");
        if (TG) tables.global_rel = tensor_of(w + "global_relative_attention_bias.weight");
        typename layer_t::inputs in(tables, heads, radius, global_block, 128);
        in.prepare(mask_f.data(), B, L);
        std::vector<S> out(static_cast<std::size_t>(B * L * H)), scratch(static_cast<std::size_t>(layer.scratch_size(B, L)));
        layer.attend(u.data(), B, L, in, out.data(), false, scratch.data());
        CHECK(rel_error(out.data(), ref.floats("attn." + name + ".output"), keep) < parity);
        return in.blocks();
    };
    check_case("local_r127", 127, 1 << 20, std::false_type{});
    check_case("local_r31", 31, 1 << 20, std::false_type{});
    // A window covering the whole input is T5's dense attention (LongT5Attention, bidirectional).
    check_case("full_bidir", 300, 1 << 20, std::false_type{});
    const auto blocks = check_case("tglobal", 127, 16, std::true_type{});
    // 18 global tokens; row 0's 12-token orphan tail joins block 17, row 1 (250 valid) uses 15.
    CHECK(blocks.globals == 18);
    CHECK(blocks.count == std::vector<index_t>{18, 15});
    CHECK(blocks.id[299] == 17);
    CHECK(blocks.id[300 + 249] == 14);
    CHECK(blocks.id[300 + 250] == -1);
}
