// Bidirectional S4D convolution — LOCOST eq. 3, appendix A; docs/models.md §1.2. For one hidden
// channel h with input v (length L) and kernels kf = K[fwd, h, ·], kb = K[bwd, h, ·]:
//
//     y[j] = Σ_{l ≤ j} kf[j − l]·v[l]  +  Σ_{l ≥ j} kb[l − j]·v[l]  +  D[h]·v[j]
//
// (lag 0 receives kf[0] + kb[0] + D). Without a backward kernel (causal model) the middle sum
// is absent.
//
// Conventions
//  * exact (default): a circular convolution of size M = fast_fft_size(2L − 1) with the circular
//    kernel c[j] = kf[j] (j < L), c[(M − j) mod M] += kb[j] (j < L). No wrap-around reaches the
//    outputs 0..L−1 because M ≥ 2L − 1 (the largest causal index is 2L − 2; the smallest
//    wrapped anti-causal index is M − L + 1 ≥ L). M is any size FFTW is fast at (2^a3^b5^c7^d),
//    not only a power of two. FFT scaling: rfft unscaled, the kernel spectrum divided by M.
//  * original_cuda (compatibility): what the original's CUDA path (use_fast_fft_conv) computes,
//    which the released checkpoints were trained with: L' = L rounded up to even,
//    M = max(2·next_pow2(L'), 16), and kb[j] placed at 2L' − j instead of M − j, i.e. the
//    anti-causal kernel delayed by M − 2L' (equal to exact only when L' is a power of two ≥ 8).
//  * Short inputs (L ≤ direct_max_length, exact mode) use the O(L²) definition directly.
//  * Short support (exact mode): when a group's kernels are zero from lag S on (S4D kernels
//    decay; layers/s4d_kernel.hpp), the same sums are computed by overlap-save over blocks: an FFT
//    of size P ≥ 2S − 1 + step yields `step` outputs y[j0 .. j0 + step) from the inputs
//    v[j0 − (S − 1) .. j0 + step + S − 1), zero outside [0, L), with the circular kernel of size P
//    (c[j] = kf[j], c[P − j] += kb[j], j < S). Nothing wraps into the kept outputs, so the result is
//    the exact definition again, at O(L·log P) instead of O(L·log L) and in cache-sized pieces.
//
// Work is split over groups of G channels (G·M ≤ 2^22 samples, so memory does not grow with
// FFT size × channels); each group computes its kernel spectra once and reuses them for every
// batch row. v and y may alias: each element of v is read before the same element of y is
// written, and groups touch disjoint columns.
#pragma once
#include <algorithm>
#include <cmath>
#include <complex>
#include <concepts>
#include <vector>

#include "../backend/backend.hpp"
#include "../core/aligned.hpp"
#include "../core/tensor.hpp"
#include "fft.hpp"
#include "precision.hpp"

namespace locost::ops {

// conv_mode { exact, original_cuda }: ops/precision.hpp.

struct conv_options {
    conv_mode mode = conv_mode::exact;
    index_t direct_max_length = 64;
};

namespace detail {
inline index_t next_pow2(index_t n) {
    index_t p = 1;
    while (p < n) p *= 2;
    return p;
}
}  // namespace detail

// FFT size and the position c[anchor − j] of kb[j], j ≥ 1, for length L.
struct conv_geometry {
    index_t M = 1, anchor = 1;
    bool direct = false;
    static conv_geometry make(index_t L, const conv_options& o) {
        conv_geometry g;
        if (o.mode == conv_mode::original_cuda) {
            const index_t Le = L + (L % 2);
            g.M = std::max<index_t>(2 * detail::next_pow2(Le), 16);
            g.anchor = 2 * Le;
        } else {
            g.direct = L <= o.direct_max_length;
            g.M = ops::fast_fft_size(std::max<index_t>(2 * L - 1, 1));
            g.anchor = g.M;
        }
        return g;
    }
};

// Overlap-save blocking for kernels of support S at length L: FFT size P, outputs per block
// `step`, `count` blocks. P = 0 when one transform of size M (the whole-length geometry) is
// expected to cost as much; the blocked form is only taken with P ≤ M/2, so its buffers fit in
// the whole-length ones.
struct conv_blocks {
    index_t P = 0, step = 0, count = 0;
    static conv_blocks make(index_t L, index_t S, index_t M) {
        conv_blocks best;
        if (S < 1 || L < 1) return best;
        auto cost = [](double n, double copies) { return copies * n * std::log2(std::max(n, 2.0)); };
        // Per channel: the kernel's transform once, the signal's forward and inverse per block.
        double best_cost = 0.8 * (cost(double(M), 1) + cost(double(M), 2));
        for (index_t m = 2; m <= 16; ++m) {
            const index_t P = fast_fft_size(m * (2 * S - 1)), step = P - 2 * (S - 1);
            if (2 * P > M) break;
            const index_t count = (L + step - 1) / step;
            const double c = cost(double(P), 1) + cost(double(P), 2.0 * double(count));
            if (c < best_cost) {
                best_cost = c;
                best = {P, step, count};
            }
        }
        return best;
    }
};

// The circular kernel of one channel: c[0..M) = 0; c[j] = kf[j] (j < L); c[0] += kb[0];
// c[(anchor − j) mod M] += kb[j] (1 ≤ j < L). kb may be nullptr (causal).
template <class Scalar>
void circular_kernel(const Scalar* kf, const Scalar* kb, index_t L, const conv_geometry& geo, Scalar* c) {
    std::fill_n(c, geo.M, Scalar(0));
    std::copy_n(kf, std::min(L, geo.M), c);
    if (!kb) return;
    c[0] += kb[0];
    // anchor ≤ M and j ≥ 1, so anchor − j lies in [0, M): no modulo on this path.
    for (index_t j = 1; j < L; ++j) c[geo.anchor - j] += kb[j];
}

struct bidirectional_conv_op {};

template <class KernelSource>
concept kernel_source_with_support = requires(const KernelSource& k, index_t h) {
    { k.support(h, h) } -> std::convertible_to<index_t>;
};

// y = BiConv(v) for a batch: v, y (batch, L, H) dense, aliasing allowed. `channels` is 2
// (bidirectional) or 1 (causal). kernels(h0, h1, L, out, thread) writes K[c, h, 0..L) for
// h in [h0, h1) to out[((h − h0)·channels + c)·L + l]; `thread` indexes per-thread scratch of
// the caller (in [0, num_threads())). A source that also has support(h0, h1) promises that those
// kernels are zero from that lag on, which lets a backend take the blocked form above.
template <class Backend, class Scalar, class KernelSource>
void bidirectional_conv(const Scalar* v, Scalar* y, index_t batch, index_t L, index_t H, index_t channels, const Scalar* D,
                        KernelSource&& kernels, const conv_options& opt) {
    if (L == 0 || H == 0 || batch == 0) return;
    kernel<bidirectional_conv_op, Backend, Scalar>::run(v, y, batch, L, H, channels, D, kernels, opt);
}

}  // namespace locost::ops
