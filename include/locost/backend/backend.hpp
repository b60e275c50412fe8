// Backends are types.
//
// Model and layer code is written once against the ops in ops/; each op dispatches to
// `kernel<Op, Backend, Scalar>`, whose primary template only fails, with a message naming what
// is missing. A backend provides an op by specialising it (backend/cpu/*.hpp for the host; a
// CUDA backend adds backend/cuda/*.hpp with the same specialisations for `locost::cuda`).
// Memory is a backend property too: `memory<Backend>` allocates the storage a tensor of that
// backend owns, and `is_host<Backend>` says whether the host may dereference it; only backend/
// asks it (backend/transfer.hpp holds the crossings model code uses).
//
// Template parameters come in one order: what a value is, then where it lives — `<Scalar,
// Backend>` for every type (tensor, layers, stacks, any_model) and for the loaders
// (models::load_model<Scalar, Backend>). An op is called naming only its backend, the element
// type deduced from its arguments (`ops::gemm<Backend>(…)`).
#pragma once
#include <cstddef>
#include <type_traits>

namespace locost {

// Host CPU: OpenBLAS or Eigen GEMM, xsimd elementwise kernels, FFTW, OpenMP threads.
struct cpu {
    static constexpr const char* name = "cpu";
};
// NVIDIA GPU: memory, transfers and kernels in backend/cuda/*.cuh (nvcc only, -DLOCOST_CUDA=ON).
// Without those headers, instantiating code with it fails at compile time with the
// static_asserts below; an op the CUDA backend lacks fails the same way under nvcc.
struct cuda {
    static constexpr const char* name = "cuda";
};

template <class T>
inline constexpr bool dependent_false = false;

// Which types are backends: cpu and cuda; a program may declare its own (the tests' emulated
// device, tests/device/emulated_device.hpp) by specialising this with the kernels, memory and
// transfers that go with it.
template <class B>
inline constexpr bool is_backend = std::is_same_v<B, cpu> || std::is_same_v<B, cuda>;
template <class B>
concept backend = is_backend<B>;

// Scalar types the library computes in. float is the production type; double serves as a
// high-precision reference path (tests) and for users who want it.
template <class T>
concept scalar = std::is_same_v<T, float> || std::is_same_v<T, double>;

// Primary template of every op kernel: instantiating it means the backend lacks the op.
template <class Op, class Backend, class Scalar = float>
struct kernel {
    static_assert(dependent_false<Backend>,
                  "locost: this backend has no kernel for this op (missing specialisation of "
                  "locost::kernel<Op, Backend, Scalar>; include the backend's headers or add one)");
};

// Storage of a backend. The primary template fails the same way.
template <class Backend>
struct memory {
    static_assert(dependent_false<Backend>,
                  "locost: this backend has no memory allocator (missing specialisation of "
                  "locost::memory<Backend>)");
};

// Crossings between host memory and a backend's memory: upload(dst, host_src, n),
// download(host_dst, src, n), copy(dst, src, n) within the backend. Explicit on purpose: a host
// pointer never reaches a device kernel by accident of an implicit copy.
template <class Backend>
struct transfer {
    static_assert(dependent_false<Backend>,
                  "locost: this backend has no host/device transfer (missing specialisation of "
                  "locost::transfer<Backend>; include the backend's headers)");
};

template <class Backend>
inline constexpr bool is_host = false;
template <>
inline constexpr bool is_host<cpu> = true;

}  // namespace locost
