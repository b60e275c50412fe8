// S4D kernels of a range of channels, K[c, h, 0..L) for h in [h0, h1), written to
// out[((h − h0)·channels + c)·L + l] (layers/s4d_kernel.hpp holds the math). The backend decides
// how channels are spread over its threads.
#pragma once
#include <algorithm>
#include <cmath>

#include "../backend/backend.hpp"
#include "../core/tensor.hpp"

namespace locost::ops {

struct ssm_kernels_op {};
struct ssm_kernel_group_op {};

// Block length T of the block form K[c, bT + j] = 2·(Q_c·Pᵀ)[b, j] (layers/s4d_kernel.hpp) for a
// kernel of length L: about sqrt(2L), a multiple of 16 in [16, 512], which balances the GEMM's
// shape against the O(T + L/T) powers evaluated in double. Every backend uses the same T.
inline index_t s4d_block_length(index_t L) {
    index_t t = static_cast<index_t>(std::sqrt(2.0 * static_cast<double>(L)));
    t = (t + 15) / 16 * 16;
    return std::min<index_t>(512, std::max<index_t>(16, t));
}

template <class Backend, class Kernel, class Scalar>
void ssm_kernels(const Kernel& k, index_t h0, index_t h1, index_t L, Scalar* out) {
    kernel<ssm_kernels_op, Backend, Scalar>::run(k, h0, h1, L, out);
}

// The same for one group of channels from inside a caller's parallel region (the bidirectional
// convolution's kernel source): `scratch` is the calling thread's (the CPU computes channel by
// channel on that thread; a GPU generates the group at once and needs none).
// Whether the backend's kernel groups are exact zeros from each channel's support on
// (layers/s4d_kernel.hpp), so that the convolution may stop there. The CPU's are; a device
// backend's generator writes whole kernels.
template <class Backend, class Scalar>
inline constexpr bool kernel_groups_stop_at_support = kernel<ssm_kernel_group_op, Backend, Scalar>::stops_at_support;

template <class Backend, class Kernel, class Scalar>
void ssm_kernel_group(const Kernel& k, index_t h0, index_t h1, index_t L, Scalar* out, typename Kernel::scratch& scratch) {
    kernel<ssm_kernel_group_op, Backend, Scalar>::run(k, h0, h1, L, out, scratch);
}

}  // namespace locost::ops
