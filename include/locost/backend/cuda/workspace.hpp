// The CUDA backend's own working buffers, sized in one place for the kernels that allocate them
// (ssm_kernels.cu, bidirectional_conv.cu, attention.cu, linear.cu) and for the memory estimate (models/memory_estimate.hpp), which refuses
// a request before the GPU runs out. Host code: no CUDA header.
#pragma once
#include <algorithm>

#include "../../core/tensor.hpp"
#include "../../ops/ssm_kernels.hpp"

namespace locost::cuda_workspace {

// Channels per FFT group of the bidirectional convolution: the group's signals within 2^25
// samples, so its buffers stay near 0.7 GB in float32 whatever the length.
inline index_t conv_group(index_t M, index_t H) {
    return std::clamp<index_t>((index_t{1} << 25) / std::max<index_t>(M, 1), 1, std::max<index_t>(H, 1));
}

// Elements of a group's buffers for FFT size M: the time-domain kernels (G, channels, L), one
// signal per channel (G, M) and two spectra (G, M/2 + 1) of complex values.
inline index_t conv_group_elements(index_t M, index_t L, index_t H, index_t channels) {
    const index_t G = conv_group(M, H);
    return G * channels * L + G * M + 2 * 2 * G * (M / 2 + 1);
}

// S4D kernel generation for `count` kernels of length L (modes complex modes, `channels`
// directions): block length, blocks, and the kernels per pass, whose three buffers (powers, block
// starts, blocked kernels) stay within 2^27 elements unless one kernel needs more.
struct s4d_pass {
    index_t Tb = 1, blocks = 1, N = 2, rows = 1, step = 1;
    static s4d_pass make(index_t L, index_t modes, index_t channels, index_t count) {
        s4d_pass p;
        p.Tb = std::min(ops::s4d_block_length(L), L);
        p.blocks = (L + p.Tb - 1) / p.Tb;
        p.N = 2 * modes;
        p.rows = channels * p.blocks;
        p.step = std::clamp<index_t>((index_t{128} << 20) / std::max<index_t>(p.per_kernel(), 1), 1, std::max<index_t>(count, 1));
        return p;
    }
    index_t per_kernel() const { return Tb * N + rows * N + rows * Tb; }
    index_t elements() const { return step * per_kernel(); }
};

// The attention kernel's split-row partials stay under this many bytes per call.
inline constexpr index_t attention_partial_bytes = index_t{64} << 20;

// A linear layer with reduced-precision weights (linear.cu) takes at most this much scratch per
// call: widened weight blocks, rows rounded to bfloat16 or quantized to int8, int32 sums; larger
// products run in slices.
inline constexpr index_t linear_scratch_bytes = index_t{32} << 20;

}  // namespace locost::cuda_workspace
