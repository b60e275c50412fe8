// S4D convolution kernel (diagonal state space, zero-order hold) — LOCOST eq. 1–2, appendix E;
// docs/models.md §1.1. Per hidden channel h, mode n < N/2 and direction c (fwd, bwd):
//
//     dt      = exp(log_dt[h])
//     A[n]    = −exp(inv_A_real[h,n]) + i·A_imag[h,n]          (Re A < 0: a stable, decaying mode)
//     z[n]    = exp(dt·A[n])
//     Ceff[c,n] = B[h,n] · C[c,h,n] · (z[n] − 1) / A[n]
//     K[c,l]  = 2 · Re Σ_n Ceff[c,n] · z[n]^l ,   l = 0 … L−1
//
// Only C has a direction index; log_dt, A and B are shared by both directions (a fact of the
// original code). K does not depend on L, so a kernel computed for L is valid, truncated, for
// every shorter length.
//
// Design. Evaluating z^l for every (n, l) is O(N·L) complex exponentials per channel; a running
// product z^l = z^(l−1)·z is cheap but drifts in float32 for l up to 10^6. We split l = b·T + j
// (block b, offset j < T) so that
//
//     K[c, bT + j] = 2 · Re Σ_n (Ceff[c,n] · z[n]^(bT)) · z[n]^j  =  2 · (Q_c · Pᵀ)[b, j]
//
// with P[j] = [Re z^j | Im z^j] (T × N) and Q_c[b] = [Re w | −Im w], w = Ceff·z^(bT) (blocks × N):
// one real GEMM per channel for both directions. The powers z^j and z^(bT) are computed in
// double, by products re-anchored with an exact exp() every `anchor` steps, then rounded to the
// scalar type, so the only float32 rounding is that of the GEMM's N-term sums. Cost per channel:
// 2 · (2·L) · N flops in a GEMM plus O((T + L/T)·N) complex products in double.
#pragma once
#include <cmath>
#include <complex>
#include <vector>

#include "../core/aligned.hpp"
#include "../core/tensor.hpp"
#include "../ops/gemm.hpp"
#include "../ops/ssm_kernels.hpp"

namespace locost::layers {

// The stored parameters of one layer's kernel (as float32 from the checkpoint, any layout
// conversion done): shapes as in the checkpoint, the trailing 2 being (real, imaginary).
struct s4d_kernel_parameters {
    index_t channels = 2;  // 2: bidirectional (fwd, bwd); 1: causal only
    index_t H = 0;         // hidden channels
    index_t modes = 0;     // N/2 complex modes
    std::vector<float> log_dt;      // (H)
    std::vector<float> inv_A_real;  // (H, modes)
    std::vector<float> A_imag;      // (H, modes)
    std::vector<float> B;           // (H, modes, 2)
    std::vector<float> C;           // (channels, H, modes, 2)
};

template <class Scalar, class Backend>
class s4d_kernel {
public:
    using cplx = std::complex<double>;

    explicit s4d_kernel(const s4d_kernel_parameters& p) : ch_(p.channels), H_(p.H), m_(p.modes) {
        dtA_.resize(static_cast<std::size_t>(H_ * m_));
        ceff_.resize(static_cast<std::size_t>(ch_ * H_ * m_));
        // Model load runs this for every layer (base: 12 × 768 × 256 modes × 2 channels): the
        // factor (exp(dtA) − 1)/A is computed once per mode, and hidden channels are spread over
        // the threads.
#pragma omp parallel for schedule(static)
        for (index_t h = 0; h < H_; ++h) {
            const double dt = std::exp(static_cast<double>(p.log_dt[h]));
            for (index_t n = 0; n < m_; ++n) {
                const std::size_t i = static_cast<std::size_t>(h * m_ + n);
                const cplx A(-std::exp(static_cast<double>(p.inv_A_real[i])), static_cast<double>(p.A_imag[i]));
                const cplx dtA = dt * A;
                const cplx B(p.B[2 * i], p.B[2 * i + 1]);
                dtA_[i] = dtA;
                // (exp(dtA) − 1) / A as a product with conj(A) / |A|²: Re A = −exp(·) < 0, so
                // |A|² is never 0 and the C library's guarded complex division is not needed.
                const cplx BZ = B * ((std::exp(dtA) - 1.0) * std::conj(A)) / std::norm(A);
                for (index_t c = 0; c < ch_; ++c) {
                    const std::size_t j = static_cast<std::size_t>((c * H_ + h) * m_ + n);
                    const cplx C(p.C[2 * j], p.C[2 * j + 1]);
                    ceff_[j] = BZ * C;
                }
            }
        }
        if constexpr (!is_host<Backend>) {
            // std::complex<double> is laid out as (re, im): the two arrays go over as they are.
            backend_factors_ = tensor<double, Backend>({2 * (H_ * m_ + ch_ * H_ * m_)});
            transfer<Backend>::upload(backend_factors_.data(), reinterpret_cast<const double*>(dtA_.data()), dtA_.size() * 2);
            transfer<Backend>::upload(backend_factors_.data() + 2 * H_ * m_, reinterpret_cast<const double*>(ceff_.data()), ceff_.size() * 2);
        }
    }

    index_t channels() const noexcept { return ch_; }
    // The per-mode factors in the backend's memory, complex double as (re, im): dtA (H, modes) and
    // ceff (channels, H, modes). What a device backend generates kernels from; the CPU reads the
    // host copies through compute().
    const double* backend_dtA() const noexcept { return backend_factors_.data(); }
    const double* backend_ceff() const noexcept { return backend_factors_.data() + 2 * H_ * m_; }
    index_t hidden() const noexcept { return H_; }
    index_t modes() const noexcept { return m_; }

    // Per-thread working memory of compute(); reuse it across calls.
    struct scratch {
        aligned_ptr<Scalar> P, Q, K;
        aligned_ptr<double> pw;
        std::size_t p_size = 0, q_size = 0, k_size = 0, pw_size = 0;
        void reserve_powers(std::size_t n) {
            if (n > pw_size) { pw = aligned_alloc_n<double>(n); pw_size = n; }
        }
        void reserve(std::size_t p, std::size_t q, std::size_t k) {
            if (p > p_size) { P = aligned_alloc_n<Scalar>(p); p_size = p; }
            if (q > q_size) { Q = aligned_alloc_n<Scalar>(q); q_size = q; }
            if (k > k_size) { K = aligned_alloc_n<Scalar>(k); k_size = k; }
        }
    };

    // Block length T for a kernel of length L: about sqrt(2L), a multiple of 16 in [16, 512],
    // which balances the GEMM's shape against the O(T + L/T) double-precision powers.
    static index_t block_length(index_t L) { return ops::s4d_block_length(L); }

    // K[c, h, 0..L) of channel h into out[c·L + l] (channels × L, direction-major), on the host:
    // the CPU backend's generator and every backend's reference.
    void compute(index_t h, index_t L, Scalar* out, scratch& s) const {
        if (L <= 0) return;
        const index_t T = std::min(block_length(L), L), blocks = (L + T - 1) / T, N = 2 * m_;
        const index_t rows = ch_ * blocks;
        s.reserve(static_cast<std::size_t>(T * N), static_cast<std::size_t>(rows * N), static_cast<std::size_t>(rows * T));
        const cplx* dtA = &dtA_[static_cast<std::size_t>(h * m_)];
        // Running powers, one per mode, as separate real/imaginary arrays so the per-row
        // updates vectorise; every `anchor` rows they are recomputed exactly.
        constexpr index_t anchor = 32;
        s.reserve_powers(static_cast<std::size_t>(4 * m_));
        double* pr = s.pw.get();      // Re z^j (or z^(bT))
        double* pi = pr + m_;         // Im
        double* sr = pi + m_;         // Re step (z or z^T)
        double* si = sr + m_;         // Im step
        auto exact = [&](double t, double* re, double* im) {
            for (index_t n = 0; n < m_; ++n) {
                const double mag = std::exp(dtA[n].real() * t), ph = dtA[n].imag() * t;
                re[n] = mag * std::cos(ph);
                im[n] = mag * std::sin(ph);
            }
        };
        auto step = [&]() {
            for (index_t n = 0; n < m_; ++n) {
                const double r = pr[n] * sr[n] - pi[n] * si[n], i = pr[n] * si[n] + pi[n] * sr[n];
                pr[n] = r;
                pi[n] = i;
            }
        };
        // P[j] = [Re z^j | Im z^j]
        exact(1.0, sr, si);
        for (index_t j = 0; j < T; ++j) {
            if (j % anchor == 0) exact(static_cast<double>(j), pr, pi);
            else step();
            Scalar* row = s.P.get() + j * N;
            for (index_t n = 0; n < m_; ++n) {
                row[n] = static_cast<Scalar>(pr[n]);
                row[m_ + n] = static_cast<Scalar>(pi[n]);
            }
        }
        // Q_c[b] = [Re w | −Im w], w = Ceff[c]·z^(bT)
        exact(static_cast<double>(T), sr, si);
        for (index_t b = 0; b < blocks; ++b) {
            if (b % anchor == 0) exact(static_cast<double>(b * T), pr, pi);
            else step();
            for (index_t c = 0; c < ch_; ++c) {
                const cplx* ce = &ceff_[static_cast<std::size_t>((c * H_ + h) * m_)];
                Scalar* q = s.Q.get() + (c * blocks + b) * N;
                for (index_t n = 0; n < m_; ++n) {
                    const double cr = ce[n].real(), ci = ce[n].imag();
                    q[n] = static_cast<Scalar>(cr * pr[n] - ci * pi[n]);
                    q[m_ + n] = static_cast<Scalar>(-(cr * pi[n] + ci * pr[n]));
                }
            }
        }
        // K_blocks (rows × T) = 2 · Q · Pᵀ
        ops::gemm<cpu, Scalar>({false, true, rows, T, N, N, N, T}, Scalar(2), s.Q.get(), s.P.get(), Scalar(0), s.K.get());
        for (index_t c = 0; c < ch_; ++c)
            for (index_t b = 0; b < blocks; ++b) {
                const index_t l0 = b * T, len = std::min(T, L - l0);
                std::copy_n(s.K.get() + (c * blocks + b) * T, len, out + c * L + l0);
            }
    }

    // The same kernel straight from the definition, in double: the reference for tests.
    double reference(index_t c, index_t h, index_t l) const {
        double k = 0;
        for (index_t n = 0; n < m_; ++n)
            k += (ceff_[static_cast<std::size_t>((c * H_ + h) * m_ + n)] *
                  std::exp(dtA_[static_cast<std::size_t>(h * m_ + n)] * static_cast<double>(l)))
                     .real();
        return 2.0 * k;
    }

private:
    index_t ch_, H_, m_;
    std::vector<cplx> dtA_;   // (H, modes)
    std::vector<cplx> ceff_;  // (channels, H, modes)
    tensor<double, Backend> backend_factors_;  // device backends: [dtA | ceff] as (re, im) pairs
};

} // namespace locost::layers
