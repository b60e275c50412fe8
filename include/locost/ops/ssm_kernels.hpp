// S4D kernels of a range of channels, K[c, h, 0..L) for h in [h0, h1), written to
// out[((h − h0)·channels + c)·L + l] (layers/s4d_kernel.hpp holds the math). The backend decides
// how channels are spread over its threads.
#pragma once
#include "../backend/backend.hpp"
#include "../core/tensor.hpp"

namespace locost::ops {

struct ssm_kernels_op {};

template <class Backend, class Kernel, class Scalar>
void ssm_kernels(const Kernel& k, index_t h0, index_t h1, index_t L, Scalar* out) {
    kernel<ssm_kernels_op, Backend, Scalar>::run(k, h0, h1, L, out);
}

} // namespace locost::ops
