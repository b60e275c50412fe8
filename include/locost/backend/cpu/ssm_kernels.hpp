// S4D kernel generation on the CPU: channels split over OpenMP threads, each with its own
// scratch; the per-channel GEMM then runs serially on Eigen (see gemm.hpp).
#pragma once
#include <vector>

#include "../../ops/ssm_kernels.hpp"
#include "threads.hpp"

namespace locost {

template <class Scalar>
struct kernel<ops::ssm_kernels_op, cpu, Scalar> {
    template <class Kernel>
    static void run(const Kernel& k, index_t h0, index_t h1, index_t L, Scalar* out) {
        std::vector<typename Kernel::scratch> scratch(static_cast<std::size_t>(num_threads()));
        const index_t per = k.channels() * L;
        cpu_detail::parallel_for_dynamic(h1 - h0, [&](index_t i, int t) {
            const cpu_detail::flush_denormals ftz;
            k.compute(h0 + i, L, out + i * per, scratch[static_cast<std::size_t>(t)]);
        });
    }
};

template <class Scalar>
struct kernel<ops::ssm_kernel_group_op, cpu, Scalar> {
    static constexpr bool stops_at_support = true;
    template <class Kernel>
    static void run(const Kernel& k, index_t h0, index_t h1, index_t L, Scalar* out, typename Kernel::scratch& scratch) {
        const index_t per = k.channels() * L;
        for (index_t h = h0; h < h1; ++h) k.compute(h, L, out + (h - h0) * per, scratch);
    }
};

}  // namespace locost
