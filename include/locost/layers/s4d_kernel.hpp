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
//
// Support. Every mode decays (|z| = e^(Re dtA) < 1), so past some length S_h the whole rest of a
// channel's kernel is below what the generation can represent anyway. The GEMM's rounding is
// relative to the mode magnitudes, not to K: its error summed over l is of order
// ε · W_h with W_h = Σ_c Σ_n Σ_l 2·|Ceff[c,n]|·|z[n]|^l = Σ_c Σ_n 2·|Ceff[c,n]| / (1 − |z[n]|).
// The dropped tail is bounded the same way, Σ_c Σ_(l ≥ S) |K[c,l]| ≤ Σ_c Σ_n 2·|Ceff[c,n]|·|z[n]|^S
// / (1 − |z[n]|), and S_h is the shortest length for which that bound is ≤ (ε/64)·W_h (ε of the
// scalar type). Entries from S_h on are written as exact zeros. With the original's
// initialisation (dt in [0.001, 0.1], Re A = −0.5) S_h is ~9K on average and at most ~42K, so a
// book-length kernel costs what a 42K one does; a checkpoint that learned slower modes gets
// longer supports by the same rule, and nothing changes below S_h.
#pragma once
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <vector>

#include "../backend/transfer.hpp"
#include "../core/aligned.hpp"
#include "../core/tensor.hpp"
#include "../ops/gemm.hpp"
#include "../ops/ssm_kernels.hpp"
#include "tensor_source.hpp"

namespace locost::layers {

// The stored parameters of one layer's kernel (as float32 from the checkpoint, any layout
// conversion done): shapes as in the checkpoint, the trailing 2 being (real, imaginary).
struct s4d_kernel_parameters {
    index_t channels = 2;           // 2: bidirectional (fwd, bwd); 1: causal only
    index_t H = 0;                  // hidden channels
    index_t modes = 0;              // N/2 complex modes
    std::vector<float> log_dt;      // (H)
    std::vector<float> inv_A_real;  // (H, modes)
    std::vector<float> A_imag;      // (H, modes)
    std::vector<float> B;           // (H, modes, 2)
    std::vector<float> C;           // (channels, H, modes, 2)

    // The kernel module's tensors under `kernel` (the original's ssm_layer.kernel): log_dt,
    // inv_A_real, A_imag, B and C. The layer keeps exp(Δ·A) per mode and the effective C in
    // complex double instead of them (the memory estimate counts that).
    static s4d_kernel_parameters read(const tensor_source& kernel, index_t channels, index_t H, index_t modes) {
        auto values = [&](const char* name, shape_t shape, param_kind kind, param_storage storage) {
            const tensor<float> t = kernel.get(name, shape, {kind, storage});
            return t.empty() ? std::vector<float>() : std::vector<float>(t.data(), t.data() + t.numel());  // empty: only recorded
        };
        s4d_kernel_parameters p;
        p.channels = channels, p.H = H, p.modes = modes;
        p.log_dt = values("log_dt", {H}, param_kind::s4d_log_dt, param_storage::scalar);
        p.inv_A_real = values("inv_A_real", {H, modes}, param_kind::s4d_a_real, param_storage::complex_per_value);
        p.A_imag = values("A_imag", {H, modes}, param_kind::s4d_a_imag, param_storage::folded_away);
        p.B = values("B", {H, modes, 2}, param_kind::s4d_b, param_storage::folded_away);
        p.C = values("C", {channels, H, modes, 2}, param_kind::s4d_c, param_storage::complex_per_pair);
        return p;
    }
};

template <class Scalar, class Backend>
class s4d_kernel {
public:
    using cplx = std::complex<double>;

    explicit s4d_kernel(const s4d_kernel_parameters& p) : ch_(p.channels), H_(p.H), m_(p.modes) {
        dtA_.resize(static_cast<std::size_t>(H_ * m_));
        ceff_.resize(static_cast<std::size_t>(ch_ * H_ * m_));
        support_.resize(static_cast<std::size_t>(H_));
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
            support_[static_cast<std::size_t>(h)] = find_support(h);
        }
        // std::complex<double> is laid out as (re, im): the arrays go over as they are (a device
        // keeps a copy; the host reads them where they are).
        dtA_on_backend_ =
            backend_array<double, Backend>(reinterpret_cast<const double*>(dtA_.data()), static_cast<index_t>(dtA_.size() * 2));
        ceff_on_backend_ =
            backend_array<double, Backend>(reinterpret_cast<const double*>(ceff_.data()), static_cast<index_t>(ceff_.size() * 2));
    }

    index_t channels() const noexcept { return ch_; }
    // The per-mode factors in the backend's memory, complex double as (re, im): dtA (H, modes) and
    // ceff (channels, H, modes). What a device backend generates kernels from; the CPU reads the
    // host copies through compute().
    const double* backend_dtA() const noexcept { return dtA_on_backend_.data(); }
    const double* backend_ceff() const noexcept { return ceff_on_backend_.data(); }
    index_t hidden() const noexcept { return H_; }
    index_t modes() const noexcept { return m_; }
    // S_h (see the header): K[c, h, l] is written as 0 for l ≥ support(h).
    index_t support(index_t h) const noexcept { return support_[static_cast<std::size_t>(h)]; }
    // The dropped tail's bound for channel h as a fraction of W_h at length S: what support()
    // keeps ≤ ε/64. Exposed for tests.
    double tail_fraction(index_t h, double S) const {
        double tail = 0, total = 0;
        for (index_t c = 0; c < ch_; ++c)
            for (index_t n = 0; n < m_; ++n) {
                const double w = weight(c, h, n);
                total += w;
                tail += w * std::exp(dtA_[static_cast<std::size_t>(h * m_ + n)].real() * S);
            }
        return total > 0 ? tail / total : 0.0;
    }

    // Per-thread working memory of compute(); reuse it across calls.
    struct scratch {
        aligned_ptr<Scalar> P, Q, K;
        aligned_ptr<double> pw;
        std::size_t p_size = 0, q_size = 0, k_size = 0, pw_size = 0;
        void reserve_powers(std::size_t n) {
            if (n > pw_size) {
                pw = aligned_alloc_n<double>(n);
                pw_size = n;
            }
        }
        void reserve(std::size_t p, std::size_t q, std::size_t k) {
            if (p > p_size) {
                P = aligned_alloc_n<Scalar>(p);
                p_size = p;
            }
            if (q > q_size) {
                Q = aligned_alloc_n<Scalar>(q);
                q_size = q;
            }
            if (k > k_size) {
                K = aligned_alloc_n<Scalar>(k);
                k_size = k;
            }
        }
    };

    // Block length T for a kernel of length L: about sqrt(2L), a multiple of 16 in [16, 512],
    // which balances the GEMM's shape against the O(T + L/T) double-precision powers.
    static index_t block_length(index_t L) { return ops::s4d_block_length(L); }

    // K[c, h, 0..L) of channel h into out[c·L + l] (channels × L, direction-major), on the host:
    // the CPU backend's generator and every backend's reference.
    void compute(index_t h, index_t L_out, Scalar* out, scratch& s) const {
        if (L_out <= 0) return;
        // Past the support the kernel is written as zeros; only the first L entries are generated.
        const index_t L = std::min(L_out, support(h));
        for (index_t c = 0; c < ch_; ++c) std::fill(out + c * L_out + L, out + (c + 1) * L_out, Scalar(0));
        if (L == 0) return;
        const index_t T = std::min(block_length(L), L), blocks = (L + T - 1) / T, N = 2 * m_;
        const index_t rows = ch_ * blocks;
        s.reserve(static_cast<std::size_t>(T * N), static_cast<std::size_t>(rows * N), static_cast<std::size_t>(rows * T));
        const cplx* dtA = &dtA_[static_cast<std::size_t>(h * m_)];
        // Running powers, one per mode, as separate real/imaginary arrays so the per-row
        // updates vectorise; every `anchor` rows they are recomputed exactly.
        constexpr index_t anchor = 32;
        s.reserve_powers(static_cast<std::size_t>(4 * m_));
        double* pr = s.pw.get();  // Re z^j (or z^(bT))
        double* pi = pr + m_;     // Im
        double* sr = pi + m_;     // Re step (z or z^T)
        double* si = sr + m_;     // Im step
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
                std::copy_n(s.K.get() + (c * blocks + b) * T, len, out + c * L_out + l0);
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
    // S_h: the smallest length whose tail bound is ≤ (ε/64)·W_h. Each term alone must meet the
    // bound there, which gives a lower end; each meeting it divided by the number of terms gives
    // an upper end; a few bisection steps between them land within ~1 % of the smallest S.
    index_t find_support(index_t h) const {
        const double rel = std::numeric_limits<Scalar>::epsilon() / 64;
        const index_t terms = ch_ * m_;
        double total = 0;
        for (index_t c = 0; c < ch_; ++c)
            for (index_t n = 0; n < m_; ++n) total += weight(c, h, n);
        if (!std::isfinite(total)) return std::numeric_limits<index_t>::max();  // |z| rounds to 1
        if (!(total > 0)) return 0;                                             // an all-zero kernel
        constexpr double unbounded = 4.0e18;                                    // modes too slow to decay: never truncated
        auto length_for = [&](double r) {
            double len = 0;
            for (index_t c = 0; c < ch_; ++c)
                for (index_t n = 0; n < m_; ++n) {
                    const double w = weight(c, h, n), a = dtA_[static_cast<std::size_t>(h * m_ + n)].real();
                    if (w <= r * total) continue;
                    len = std::max(len, a < 0 ? std::log(r * total / w) / a : unbounded);
                }
            return std::min(len, unbounded);
        };
        double lo = length_for(rel), hi = length_for(rel / static_cast<double>(terms));
        if (hi >= unbounded) return std::numeric_limits<index_t>::max();
        for (int i = 0; i < 8; ++i) {
            const double mid = 0.5 * (lo + hi);
            (tail_fraction(h, mid) <= rel ? hi : lo) = mid;
        }
        return static_cast<index_t>(std::ceil(hi));
    }
    // 2·|Ceff|/(1 − |z|) over 2: the bound on Σ_l |term| (the common factor 2 cancels in ratios).
    double weight(index_t c, index_t h, index_t n) const {
        const double a = dtA_[static_cast<std::size_t>(h * m_ + n)].real();
        return std::abs(ceff_[static_cast<std::size_t>((c * H_ + h) * m_ + n)]) / -std::expm1(a);
    }

    index_t ch_, H_, m_;
    std::vector<cplx> dtA_;         // (H, modes)
    std::vector<cplx> ceff_;        // (channels, H, modes)
    std::vector<index_t> support_;  // (H)
    // dtA_ and ceff_ where the backend's kernels read them, as (re, im) pairs. They view the
    // vectors' buffers on the host, which a move of this object keeps in place.
    backend_array<double, Backend> dtA_on_backend_, ceff_on_backend_;
};

}  // namespace locost::layers
