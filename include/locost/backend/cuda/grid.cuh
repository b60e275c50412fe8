// Launch geometry shared by the backend's elementwise kernels: a fixed block size and a grid
// capped where a grid-stride loop covers the rest.
#pragma once

#include <algorithm>

#include "runtime.cuh"

namespace locost::cuda_detail {

constexpr unsigned grid_threads = 256;

inline unsigned grid_of(index_t count) {
    return static_cast<unsigned>(std::min<index_t>(std::max<index_t>((count + grid_threads - 1) / grid_threads, 1), 65535 * 16));
}

}  // namespace locost::cuda_detail

#define LOCOST_GRID_STRIDE(i, count)                                                                                                       \
    for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < (count);                                             \
         i += static_cast<index_t>(gridDim.x) * blockDim.x)
