// The CPU kernels' level (backend/cpu/isa.hpp): how LOCOST_ISA, the CPU and the build settle it,
// the exact errors, that the kernels of each target region equal their scalar form, and that the
// int8 and bfloat16 tiles take a call exactly at the levels that allow them. The parity of whole
// models at each level is the per-level CTest entries' (tests/CMakeLists.txt, isa_*).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <locost/locost.hpp>
#include <locost/runtime/machine.hpp>
#include <string>
#include <vector>

namespace {

using locost::isa_level;

std::string resolve_error(isa_level cpu, isa_level compiled, const char* requested) {
    try {
        (void)locost::cpu_detail::resolve_isa_level(cpu, compiled, requested);
    } catch (const locost::error& e) { return e.what(); }
    return "no error";
}

bool cpu_below(isa_level l) { return locost::cpu_isa() < l; }

std::vector<float> test_row(int n, float scale) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
        x[static_cast<std::size_t>(i)] = scale * std::sin(0.37f * static_cast<float>(i) + 0.1f) * (1.0f + static_cast<float>(i % 7));
    return x;
}

}  // namespace

TEST_CASE("isa: LOCOST_ISA lowers the level, never above the CPU's nor below the build's; the errors say what is there") {
    using locost::cpu_detail::resolve_isa_level;
    CHECK(locost::isa_level_name(isa_level::baseline) == "baseline");
    CHECK(locost::isa_level_name(isa_level::avx512_vnni) == "avx512-vnni");
    CHECK(locost::isa_level_name(isa_level::amx) == "amx");
    // unset: the CPU's level
    CHECK(resolve_isa_level(isa_level::avx512_vnni, isa_level::baseline, "") == isa_level::avx512_vnni);
    CHECK(resolve_isa_level(isa_level::avx2, isa_level::avx2, "") == isa_level::avx2);
    // every level at or below the CPU's, at or above the build's
    for (int cpu = 0; cpu < 5; ++cpu)
        for (int want = 0; want <= cpu; ++want)
            CHECK(resolve_isa_level(static_cast<isa_level>(cpu), isa_level::baseline,
                                    locost::isa_level_names[static_cast<std::size_t>(want)]) == static_cast<isa_level>(want));
    CHECK(resolve_error(isa_level::avx2, isa_level::baseline, "avx512") ==
          "[locost.isa.above_cpu] LOCOST_ISA=avx512: this CPU has avx2, the highest level its kernels can use");
    CHECK(resolve_error(isa_level::avx512_vnni, isa_level::avx512_vnni, "avx2") ==
          "[locost.isa.below_build] LOCOST_ISA=avx2: this build was compiled for avx512-vnni (-march=native); a portable build "
          "(-DLOCOST_NATIVE=OFF) can go lower");
    CHECK(resolve_error(isa_level::avx512, isa_level::baseline, "AVX2") ==
          "[locost.isa.unknown_level] LOCOST_ISA=AVX2: expected one of baseline, avx2, avx512, avx512-vnni, amx");
    CHECK(resolve_error(isa_level::avx2, isa_level::avx512, "") ==
          "[locost.isa.build_above_cpu] this build was compiled for avx512 (-march) but this CPU has avx2: build with "
          "-DLOCOST_NATIVE=OFF for a portable build");
}

TEST_CASE("isa: the process runs at the CPU's level, or at LOCOST_ISA's") {
    const char* env = std::getenv("LOCOST_ISA");
    const isa_level level = locost::kernels_isa();
    if (env) CHECK(locost::isa_level_name(level) == env);
    else CHECK(level == std::max(locost::cpu_isa(), locost::compiled_isa_level()));
    CHECK(level <= locost::cpu_isa());
    CHECK(level >= locost::compiled_isa_level());
    // under qemu-user (tests/CMakeLists.txt, qemu_*): the level of the CPU model it emulates
    if (const char* expect = std::getenv("LOCOST_EXPECT_ISA")) CHECK(locost::isa_level_name(level) == expect);
    const auto f = locost::read_cpu_isa_features();
    CHECK(locost::level_of(f) == locost::cpu_isa());
    // each level implies the ones below it
    CHECK((!f.avx512 || f.avx2));
    CHECK((!f.avx512_vnni || f.avx512));
    CHECK((!f.amx || f.avx512_vnni));
}

TEST_CASE("isa: the int8 and bfloat16 tiles take a call exactly where the level allows them") {
    using namespace locost;
    std::vector<std::int8_t> rows(64 * 8, 1);
    std::vector<float> scales(8, 0.5f), q(64, 0.25f), out(64);
    ops::attention_problem<float> p;
    p.q = q.data();
    p.nq = 1;
    p.ldq = 64;
    p.k = ops::kv_matrix{ops::kv_precision::i8, rows.data(), scales.data(), 64};
    p.v = p.k;
    p.nk = 8;
    p.out = out.data();
    p.ldo = 64;
    p.products = ops::attention_products::i8;
    const bool vnni = LOCOST_ISA_REGIONS && kernels_isa() >= isa_level::avx512_vnni;
    CHECK(cpu_detail::cache_i8::accepts(p, 64) == vnni);
    const cpu_detail::fold_i8 i8(q.data(), 1, 64, p.k, 64, ops::attention_products::i8);
    CHECK(i8.takes() == vnni);
    std::vector<std::uint16_t> bf(64 * 8, 0x3f80);
    const ops::kv_matrix sb{ops::kv_precision::bf16, bf.data(), nullptr, 64};
    const cpu_detail::fold_bf16 b16(q.data(), 1, 64, sb, 64, ops::attention_products::bf16);
    CHECK(b16.takes() == (vnni && read_cpu_isa_features().avx512_bf16));
    p.products = ops::attention_products::exact;  // never without asking
    CHECK_FALSE(cpu_detail::cache_i8::accepts(p, 64));
}

#if LOCOST_ISA_REGIONS
TEST_CASE("isa: the AVX-512 roundings equal their scalar form, bit for bit" * doctest::skip(cpu_below(isa_level::avx512))) {
    using namespace locost;
    for (int n : {1, 15, 16, 17, 64, 333}) {
        auto x = test_row(n, 3.0f);
        if (n > 3) {
            x[2] = 0.5f;  // ties round to even, as lrint and nearbyint do
            x[3] = -0.0f;
        }
        // int8 rows of a linear's input (i8_products.hpp)
        std::vector<std::int8_t> q(static_cast<std::size_t>(n)), ref(q.size());
        float s = 0, s_ref = 0;
        cpu_detail::quantize_row_avx512(x.data(), n, q.data(), s);
        float m = 0;
        for (float v : x) m = std::max(m, std::fabs(v));
        s_ref = m / 127.0f;
        for (int i = 0; i < n; ++i)
            ref[static_cast<std::size_t>(i)] =
                static_cast<std::int8_t>(std::clamp(std::nearbyint(x[static_cast<std::size_t>(i)] * (127.0f / m)), -127.0f, 127.0f));
        CHECK(s == s_ref);
        CHECK(q == ref);
        // an int8 cache's rows (copy.hpp): the prefix done sixteen at a time
        std::vector<std::int8_t> c(q.size());
        const float inv = 1.0f / s_ref;
        const index_t done = cpu_detail::round_to_i8_avx512(x.data(), n, inv, c.data());
        CHECK(done == n / 16 * 16);
        for (index_t i = 0; i < done; ++i)
            CHECK(c[static_cast<std::size_t>(i)] == static_cast<std::int8_t>(std::lrint(x[static_cast<std::size_t>(i)] * inv)));
        // bfloat16 (bf16_products.hpp), NaN and infinities included
        if (n > 6) {
            x[4] = std::nanf("");
            x[5] = -INFINITY;
            x[6] = 3.0e38f;
        }
        std::vector<std::uint16_t> b(q.size());
        const index_t rounded = cpu_detail::round_to_bf16_avx512(x.data(), n, b.data());
        CHECK(rounded == n / 16 * 16);
        for (index_t i = 0; i < rounded; ++i) CHECK(b[static_cast<std::size_t>(i)] == float_to_bf16(x[static_cast<std::size_t>(i)]));
    }
}

TEST_CASE("isa: the AVX-512 softmax exponentials are within 2e-7 of std::exp" * doctest::skip(cpu_below(isa_level::avx512))) {
    using namespace locost;
    auto s = test_row(100, 4.0f);
    s[7] = -INFINITY;
    float m = -INFINITY;
    for (float v : s) m = std::max(m, v);
    std::vector<std::uint16_t> e(s.size());
    float sum = 0;
    const index_t done = cpu_detail::bf16_exponentials_avx512(s.data(), 100, m, e.data(), sum);
    CHECK(done == 96);
    double ref_sum = 0;
    for (index_t j = 0; j < done; ++j) {
        const double x = std::exp(static_cast<double>(s[static_cast<std::size_t>(j)]) - m);
        ref_sum += x;
        // bfloat16 keeps 8 bits: the rounding of a value within 2e-7 relative rarely differs, and then by one unit
        const float back = bf16_to_float(e[static_cast<std::size_t>(j)]);
        CHECK(std::fabs(back - x) <= 4e-3 * x + 1e-30);
    }
    CHECK(std::fabs(sum - ref_sum) <= 2e-7 * ref_sum * 4);
}

TEST_CASE(
    "isa: the activations at the process's level (relu, gelu-tanh as x·σ(2u), silu) are within 2e-6 (relative) + 5e-7 of the formulas in double") {
    using namespace locost;
    const int n = 1003;  // (a tail past every vector width)
    std::vector<float> x(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = -30.0f + 60.0f * static_cast<float>(i) / n;
    x[0] = -1e4f;  // e^(−2u) and e^(−x) overflow: 0 (or −0), never NaN
    x[1] = 1e4f;
    x[2] = 0.0f;
    auto check = [&]<activation A>() {
        auto y = x, gated = x;
        const std::vector<float> ones(x.size(), 1.0f);
        kernel<ops::activate_op, cpu, float>::run<A>(y.data(), n);
        kernel<ops::gate_op, cpu, float>::run<A>(gated.data(), ones.data(), 1, n, n);
        // (5e-7 absolute: xsimd's gelu-tanh at the build's width forms 1 + tanh(u), which cancels
        // for x < 0 and leaves ~1e-7 there; x·σ(2u) does not.)
        int outside = 0;
        for (int i = 0; i < n; ++i) {
            const auto k = static_cast<std::size_t>(i);
            const double ref = cpu_detail::apply_act<A>(static_cast<double>(x[k]));
            CHECK(std::isfinite(y[k]));
            outside += std::fabs(y[k] - ref) > 2e-6 * std::fabs(ref) + 5e-7 ? 1 : 0;
            CHECK(gated[k] == y[k]);
        }
        INFO("activation " << static_cast<int>(A) << " at level " << isa_level_name(kernels_isa()));
        CHECK(outside == 0);
    };
    check.template operator()<activation::relu>();
    check.template operator()<activation::gelu_tanh>();
    check.template operator()<activation::silu>();
}

TEST_CASE("isa: the FMA peak is measured at the CPU's widest vector, whatever the build") {
    const auto k = locost::runtime::widest_fma_chains();
    const int want = locost::cpu_isa() >= isa_level::avx512 ? 16 : locost::cpu_isa() >= isa_level::avx2 ? 8 : 4;
    CHECK(k.lanes == std::max(want, static_cast<int>(xsimd::batch<float>::size)));
    // the same chains at every width: 1000 steps of acc·0.999999 + 1e-7 from 1 + 0.001c, summed
    double expected = 0;
    for (int c = 0; c < 12; ++c) {
        double a = 1.0 + 0.001 * c;
        for (int i = 0; i < 1000; ++i) a = a * 0.999999 + 1e-7;
        expected += a * k.lanes;
    }
    CHECK(k.run(1000) == doctest::Approx(expected).epsilon(1e-3));  // float32 chains against double: a wrong lane count is off by 2x
}
#endif

TEST_CASE(
    "isa: the softmax rows at the process's level: max exact, e^(x − m) within 4e-7 (relative) of double, −∞ gives 0 and NaN stays NaN") {
    using namespace locost;
    INFO("level " << isa_level_name(kernels_isa()));
    const int n = 1003;  // (a tail past every vector width)
    auto row = test_row(n, 3.0f);
    row[5] = row[40] = -INFINITY;  // masked scores
    float want_max = -INFINITY;
    for (float v : row) want_max = std::max(want_max, v);
    CHECK(cpu_detail::max_row(row.data(), n) == want_max);
    CHECK(cpu_detail::max_row(row.data(), 3) == std::max({row[0], row[1], row[2]}));
    auto e = row;
    const float sum = cpu_detail::exp_row(e.data(), want_max, n);
    double ref_sum = 0;
    int outside = 0;
    for (int j = 0; j < n; ++j) {
        const auto k = static_cast<std::size_t>(j);
        const float d = row[k] - want_max;  // (rounded in float as the kernel's: the exp's error alone is checked)
        const double ref = std::exp(static_cast<double>(d));
        ref_sum += ref;
        outside += std::fabs(e[k] - ref) > 4e-7 * ref ? 1 : 0;
    }
    CHECK(outside == 0);
    CHECK(e[5] == 0.0f);
    CHECK(e[40] == 0.0f);
    CHECK(std::fabs(sum - ref_sum) <= 1e-6 * ref_sum);
    std::vector<float> nan_row(40, 0.5f);
    nan_row[17] = NAN;
    (void)cpu_detail::exp_row(nan_row.data(), 1.0f, 40);
    CHECK(std::isnan(nan_row[17]));
    CHECK(nan_row[16] == doctest::Approx(std::exp(-0.5)).epsilon(1e-6));
    auto added = row;
    const auto b = test_row(n, -0.5f);
    cpu_detail::add_row(added.data(), b.data(), n);
    int wrong = 0;
    for (std::size_t k = 0; k < added.size(); ++k) wrong += added[k] == row[k] + b[k] ? 0 : 1;
    CHECK(wrong == 0);
}

TEST_CASE("isa: the norms at the process's level (RMS, layer) are within 2e-6 of the formulas in double") {
    using namespace locost;
    INFO("level " << isa_level_name(kernels_isa()));
    const int rows = 3, n = 1003;
    auto x = test_row(rows * n, 2.0f);
    for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(n + i)] += 40.0f;  // |mean| ≫ std in row 1
    const auto w = test_row(n, 0.7f), b = test_row(n, -0.2f);
    std::vector<float> rms(x.size()), ln(x.size());
    const float eps = 1e-6f;
    kernel<ops::rms_norm_op, cpu, float>::run(x.data(), n, w.data(), eps, rms.data(), n, rows, n);
    kernel<ops::layer_norm_op, cpu, float>::run(x.data(), n, w.data(), b.data(), eps, ln.data(), n, rows, n);
    int outside = 0;
    for (int r = 0; r < rows; ++r) {
        const float* xr = x.data() + r * n;
        double ss = 0, mean = 0, var = 0;
        for (int i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i], mean += xr[i];
        mean /= n;
        for (int i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
        const double inv_rms = 1 / std::sqrt(ss / n + eps), inv_std = 1 / std::sqrt(var / n + eps);
        for (int i = 0; i < n; ++i) {
            const auto k = static_cast<std::size_t>(r * n + i), c = static_cast<std::size_t>(i);
            const double want_rms = xr[i] * inv_rms * w[c], want_ln = (xr[i] - mean) * inv_std * w[c] + b[c];
            outside += std::fabs(rms[k] - want_rms) > 2e-6 * (std::fabs(want_rms) + 1) ? 1 : 0;
            outside += std::fabs(ln[k] - want_ln) > 2e-6 * (std::fabs(want_ln) + 1) ? 1 : 0;
        }
    }
    CHECK(outside == 0);
}

TEST_CASE("isa: round_half_even is nearbyint (ties to even) over the int8 range") {
    int wrong = 0;
    for (int i = -4 * 256; i <= 4 * 256; ++i) {
        const float v = static_cast<float>(i) / 4.0f;  // every quarter: the ties ±0.5, ±1.5, … included
        wrong += locost::round_half_even(v) == std::nearbyint(v) ? 0 : 1;
        const float u = v * 1.0001f + 1e-3f;
        wrong += locost::round_half_even(u) == std::nearbyint(u) ? 0 : 1;
    }
    CHECK(wrong == 0);
    CHECK(locost::round_half_even(2.5f) == 2.0f);
    CHECK(locost::round_half_even(-3.5f) == -4.0f);
}
