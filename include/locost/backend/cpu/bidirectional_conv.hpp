// The bidirectional convolution on the CPU: FFTW transforms per group of channels, OpenMP over
// groups; overlap-save blocks when the group's kernels have a short support. The conventions
// (exact and original_cuda geometry, blocks, scaling, aliasing) are those of
// ops/bidirectional_conv.hpp.
#pragma once
#include <algorithm>
#include <complex>
#include <vector>

#include "../../core/aligned.hpp"
#include "../../ops/bidirectional_conv.hpp"
#include "fft.hpp"
#include "threads.hpp"

namespace locost {

template <class Scalar>
struct kernel<ops::bidirectional_conv_op, cpu, Scalar> {
    template <class KernelSource>
    static void run(const Scalar* v, Scalar* y, index_t batch, index_t L, index_t H, index_t channels, const Scalar* D,
                    KernelSource& kernels, const ops::conv_options& opt) {
        using Backend = cpu;
        const ops::conv_geometry geo = ops::conv_geometry::make(L, opt);
        const index_t M = geo.M, Mc = M / 2 + 1;
        const index_t G = std::clamp<index_t>((index_t{1} << 22) / M, 1, 16);
        const index_t groups = (H + G - 1) / G;
        const index_t LH = L * H;

        struct buffers {
            aligned_ptr<Scalar> kern, sig;
            aligned_ptr<std::complex<Scalar>> kspec, spec;
        };
        std::vector<buffers> scratch(static_cast<std::size_t>(num_threads()));

        cpu_detail::parallel_for_dynamic(groups, [&](index_t gi, int thread) {
            const cpu_detail::flush_denormals ftz;  // decaying kernels pass through the denormal range
            buffers& s = scratch[static_cast<std::size_t>(thread)];
            if (!s.kern) {
                s.kern = aligned_alloc_n<Scalar>(static_cast<std::size_t>(G * channels * L));
                if (!geo.direct) {
                    s.sig = aligned_alloc_n<Scalar>(static_cast<std::size_t>(G * M));
                    s.kspec = aligned_alloc_n<std::complex<Scalar>>(static_cast<std::size_t>(G * Mc));
                    s.spec = aligned_alloc_n<std::complex<Scalar>>(static_cast<std::size_t>(G * Mc));
                }
            }
            const index_t h0 = gi * G, h1 = std::min(H, h0 + G), g = h1 - h0;
            kernels(h0, h1, L, s.kern.get(), thread);

            if (geo.direct) {
                for (index_t b = 0; b < batch; ++b) {
                    const Scalar* vb = v + b * LH;
                    Scalar* yb = y + b * LH;
                    // Outputs first into sig-less temporaries: y may alias v, so keep the inputs.
                    std::vector<Scalar> col(static_cast<std::size_t>(L)), out(static_cast<std::size_t>(L));
                    for (index_t k = 0; k < g; ++k) {
                        const index_t h = h0 + k;
                        const Scalar* kf = s.kern.get() + k * channels * L;
                        const Scalar* kb = channels > 1 ? kf + L : nullptr;
                        for (index_t l = 0; l < L; ++l) col[l] = vb[l * H + h];
                        for (index_t j = 0; j < L; ++j) {
                            Scalar acc = D[h] * col[j];
                            for (index_t l = 0; l <= j; ++l) acc += kf[j - l] * col[l];
                            if (kb)
                                for (index_t l = j; l < L; ++l) acc += kb[l - j] * col[l];
                            out[j] = acc;
                        }
                        for (index_t l = 0; l < L; ++l) yb[l * H + h] = out[l];
                    }
                }
                return;
            }

            // Zero from lag S on: overlap-save blocks of size P when that is cheaper.
            index_t S = L;
            if constexpr (ops::kernel_source_with_support<KernelSource>) S = std::min(L, kernels.support(h0, h1));
            const ops::conv_blocks blk = opt.mode == ops::conv_mode::exact ? ops::conv_blocks::make(L, S, M) : ops::conv_blocks{};
            const index_t P = blk.P ? blk.P : M, Pc = P / 2 + 1;

            // Circular kernels of the group, their spectra scaled by 1/P.
            Scalar* c = s.sig.get();
            const ops::conv_geometry kgeo = blk.P ? ops::conv_geometry{P, P, false} : geo;
            for (index_t k = 0; k < g; ++k) {
                const Scalar* kf = s.kern.get() + k * channels * L;
                ops::circular_kernel(kf, channels > 1 ? kf + L : nullptr, blk.P ? S : L, kgeo, c + k * P);
            }
            ops::rfft<Backend, Scalar>(c, s.kspec.get(), P, g);
            const Scalar inv_p = Scalar(1) / static_cast<Scalar>(P);
            for (index_t i = 0; i < g * Pc; ++i) s.kspec[i] *= inv_p;

            if (blk.P) {
                // Outputs of a block wait in `pending` (rows × g) until the next block has read
                // its inputs: y may alias v, and consecutive blocks' inputs overlap by 2(S − 1).
                Scalar* sig = s.sig.get();
                Scalar* pending = sig + g * P;  // P + step ≤ 2P ≤ M: inside the whole-length buffer
                const index_t lead = S - 1;
                for (index_t b = 0; b < batch; ++b) {
                    const Scalar* vb = v + b * LH;
                    Scalar* yb = y + b * LH;
                    index_t pending_rows = 0, pending_at = 0;
                    auto flush = [&] {
                        for (index_t t = 0; t < pending_rows; ++t) {
                            Scalar* yrow = yb + (pending_at + t) * H + h0;
                            for (index_t k = 0; k < g; ++k) yrow[k] = pending[t * g + k];
                        }
                        pending_rows = 0;
                    };
                    for (index_t j0 = 0; j0 < L; j0 += blk.step) {
                        const index_t first = j0 - lead, rows = std::min(blk.step, L - j0);
                        const index_t lo = std::max<index_t>(first, 0), hi = std::min(L, first + P);
                        for (index_t k = 0; k < g; ++k) {
                            std::fill(sig + k * P, sig + k * P + (lo - first), Scalar(0));
                            std::fill(sig + k * P + (hi - first), sig + (k + 1) * P, Scalar(0));
                        }
                        for (index_t l = lo; l < hi; ++l) {
                            const Scalar* row = vb + l * H + h0;
                            for (index_t k = 0; k < g; ++k) sig[k * P + (l - first)] = row[k];
                        }
                        flush();
                        for (index_t t = 0; t < rows; ++t)
                            for (index_t k = 0; k < g; ++k) pending[t * g + k] = D[h0 + k] * sig[k * P + lead + t];
                        ops::rfft<Backend, Scalar>(sig, s.spec.get(), P, g);
                        for (index_t i = 0; i < g * Pc; ++i) s.spec[i] *= s.kspec[i];
                        ops::irfft<Backend, Scalar>(s.spec.get(), sig, P, g);
                        for (index_t t = 0; t < rows; ++t)
                            for (index_t k = 0; k < g; ++k) pending[t * g + k] += sig[k * P + lead + t];
                        pending_rows = rows;
                        pending_at = j0;
                    }
                    flush();
                }
                return;
            }

            for (index_t b = 0; b < batch; ++b) {
                const Scalar* vb = v + b * LH;
                Scalar* yb = y + b * LH;
                Scalar* sig = s.sig.get();
                for (index_t l = 0; l < L; ++l) {
                    const Scalar* row = vb + l * H + h0;
                    for (index_t k = 0; k < g; ++k) sig[k * M + l] = row[k];
                }
                for (index_t k = 0; k < g; ++k) std::fill(sig + k * M + L, sig + (k + 1) * M, Scalar(0));
                ops::rfft<Backend, Scalar>(sig, s.spec.get(), M, g);
                for (index_t i = 0; i < g * Mc; ++i) s.spec[i] *= s.kspec[i];
                ops::irfft<Backend, Scalar>(s.spec.get(), sig, M, g);
                for (index_t l = 0; l < L; ++l) {
                    const Scalar* vrow = vb + l * H + h0;
                    Scalar* yrow = yb + l * H + h0;
                    for (index_t k = 0; k < g; ++k) yrow[k] = sig[k * M + l] + D[h0 + k] * vrow[k];
                }
            }
        });
    }
};

}  // namespace locost
