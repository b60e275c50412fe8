// Core kernels against plain scalar loops: the GEMM every projection calls, over both scalar
// types, every transposition, padded leading dimensions, alpha/beta, and the row counts where the
// CPU backend switches strategy (matrix-vector products, the few-rows kernel of decoding steps,
// the BLAS GEMM, split over threads along M or N).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <locost/locost.hpp>
#include <random>
#include <vector>

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(g));
    return v;
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

TEST_CASE_TEMPLATE("gemm: every strategy of the CPU backend equals the scalar loop", T, float, double) {
    using locost::index_t;
    const int saved = locost::num_threads();
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
    for (int threads : {1, 2}) {
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
                        INFO("threads " << threads << " m " << m << " k " << k << " n " << n << " trans_a " << g.trans_a
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
    locost::set_num_threads(saved);
}
