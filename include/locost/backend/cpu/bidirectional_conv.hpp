// The bidirectional convolution on the CPU: FFTW transforms per group of channels, OpenMP over
// groups. The conventions (exact and original_cuda geometry, scaling, aliasing) are those of
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

            // Circular kernels of the group, their spectra scaled by 1/M.
            Scalar* c = s.sig.get();
            for (index_t k = 0; k < g; ++k) {
                const Scalar* kf = s.kern.get() + k * channels * L;
                ops::circular_kernel(kf, channels > 1 ? kf + L : nullptr, L, geo, c + k * M);
            }
            ops::rfft<Backend, Scalar>(c, s.kspec.get(), M, g);
            const Scalar inv_m = Scalar(1) / static_cast<Scalar>(M);
            for (index_t i = 0; i < g * Mc; ++i) s.kspec[i] *= inv_m;

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

} // namespace locost
