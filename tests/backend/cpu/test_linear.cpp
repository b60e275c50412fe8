// The CPU backend's linear layers (backend/cpu/linear.hpp, layers/weight_matrix.hpp) against plain
// scalar loops: float32, bfloat16 and int8 weights, and bfloat16 and int8 products.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <locost/locost.hpp>
#include <utility>
#include <vector>

#include "backend/cpu/random_values.hpp"
#include "helpers.hpp"

TEST_CASE(
    "linear: bfloat16 and int8 weights equal the scalar loop over their widened values (fused few-rows kernel, row groups over stretches of k, widen-then-GEMM, bfloat16 and int8 products)") {
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
                                else if (locost::ops::stored_bf16(p))
                                    stored[at] = locost::bf16_to_float(static_cast<const std::uint16_t*>(v.data)[at]);
                                else if (!locost::ops::stored_i8(p)) FAIL("an unknown storage");
                                else stored[at] = static_cast<double>(static_cast<const std::int8_t*>(v.data)[at]) * v.scale[o];
                                const double e = std::abs(stored[at] - static_cast<double>(w[o * in + k]));
                                // bfloat16: half an ulp of 8 bits (2^-8 relative); int8: half a step of max|row|/127
                                const double bound = p == P::native ? 0.0
                                    : locost::ops::stored_bf16(p)   ? std::abs(static_cast<double>(w[o * in + k])) * 0x1p-8
                                                                    : row_max / 254.0 + row_max * 1e-6;
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
                                for (index_t k = 0; k < in; ++k)
                                    s += xs[static_cast<std::size_t>(i * ldx + k)] * stored[static_cast<std::size_t>(o * in + k)];
                                double& e = expect[static_cast<std::size_t>(i * ldy + o)];
                                e = 0.5 * s + (accumulate ? e : 0.0);
                            }
                        const auto y0 = y;
                        m.apply(x.data(), ldx, rows, y.data(), ldy, 0.5f, accumulate);
                        double worst = 0;
                        for (index_t i = 0; i < rows; ++i)
                            for (index_t o = 0; o < out; ++o) {
                                const auto at = static_cast<std::size_t>(i * ldy + o);
                                worst =
                                    std::max(worst, std::abs(static_cast<double>(y[at]) - expect[at]) / std::sqrt(static_cast<double>(in)));
                            }
                        INFO("threads " << threads << " precision " << static_cast<int>(p) << " rows " << rows << " in " << in << " out "
                                        << out << " accumulate " << accumulate);
                        CHECK(worst_storage <= 0.0);
                        CHECK(worst <= 2e-5);
                        for (index_t i = 0; i < rows; ++i)  // the padding of y is never written
                            for (index_t o = out; o < ldy; ++o) CHECK(std::isnan(y[static_cast<std::size_t>(i * ldy + o)]) == !accumulate);
                        CHECK(m.bytes() ==
                              static_cast<std::size_t>(out * in) *
                                      (p == P::native                    ? 4
                                           : locost::ops::stored_bf16(p) ? 2
                                                                         : 1) +
                                  (locost::ops::stored_i8(p) ? static_cast<std::size_t>(out) * 4 : 0));
                        // Up to 64 rows (a batch of documents decoding together: one row each)
                        // every row is bit for bit its own one-row product, so a document's
                        // result in a batch is that of its own run (products that round x aside).
                        if (rows <= 64 && (p == P::native || p == P::bf16 || p == P::i8)) {
                            index_t differ = 0;
                            for (index_t i = 0; i < rows; ++i) {
                                std::vector<float> one(y0.begin() + i * ldy, y0.begin() + (i + 1) * ldy);
                                m.apply(x.data() + i * ldx, ldx, 1, one.data(), ldy, 0.5f, accumulate);
                                for (index_t o = 0; o < out; ++o)
                                    differ += one[static_cast<std::size_t>(o)] != y[static_cast<std::size_t>(i * ldy + o)];
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
