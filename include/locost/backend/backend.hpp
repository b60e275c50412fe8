// Backends are types. Model and layer code is written once against the op templates in
// ops/; each op dispatches to `kernel<Op, Backend>`, whose primary template only fails
// with a message naming the op and the backend. A backend provides an op by specialising
// it (backend/cpu/*.hpp; backend/cuda/*.hpp when CUDA is enabled).
#pragma once
#include <type_traits>

namespace locost {

// Host CPU: Eigen/OpenBLAS GEMM, xsimd elementwise kernels, FFTW, OpenMP threads.
struct cpu {
    static constexpr const char* name = "cpu";
};
// NVIDIA GPU: cuBLAS, cuFFT and CUDA kernels. Declared always so that code can name it;
// its kernels exist only when the CUDA backend headers are included.
struct cuda {
    static constexpr const char* name = "cuda";
};

template <class T>
inline constexpr bool dependent_false = false;

template <class B>
concept backend = std::is_same_v<B, cpu> || std::is_same_v<B, cuda>;

// Primary template of every op kernel: instantiating it means the backend lacks the op.
template <class Op, class Backend, class Scalar = float>
struct kernel {
    static_assert(dependent_false<Backend>,
                  "locost: this backend has no kernel for this op (missing specialisation of "
                  "locost::kernel<Op, Backend, Scalar>; include the backend's headers or add one)");
};

} // namespace locost
