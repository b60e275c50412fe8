// A host emulation of the part of CUDA, cuBLAS and cuFFT that the CUDA backend's .cu files use,
// so that those very files, compiled by the host compiler against these headers, run on a machine
// without a GPU (tests/CMakeLists.txt: locost_cuda_emulated and the test "cuda_emulated").
//
// What it checks: the kernels' arithmetic and indexing, block barriers and warp shuffles taken as
// CUDA defines them, every launch configuration, cuBLAS's argument rules (leading dimensions),
// and the backend's host side (allocator, streams, plans) end to end. What it cannot: timing,
// races between blocks or streams (blocks run one after another, each launch to completion), and
// anything about the hardware's memory model or speed. Those stay for a real GPU.
//
// Execution model. A launch runs its blocks in order on the calling thread. The threads of a
// block are fibers (Boost.Context: switching costs a few nanoseconds, where ucontext makes a
// system call), run in thread order until each finishes or waits (LOCOST_CUDA_EMULATOR_REVERSE=1:
// blocks and threads last first, so that a kernel relying on an order CUDA does not promise fails
// in one of the two runs):
//   __syncthreads()         waits until every thread of the block that has not returned arrives;
//   __shfl_*_sync(mask,..)  is a warp-wide exchange: the mask must name all 32 lanes, every lane
//                           of the warp must still be running, and the warp must be whole.
// A violation, or threads waiting on each other for ever, is a kernel fault: the launch stops and
// the next CUDA call reports cudaErrorLaunchFailure, as a fault on a GPU surfaces at the next
// synchronisation; the reason is printed to stderr.
//
// Device memory is host memory from posix_memalign of exactly the requested bytes (so AddressSanitizer sees
// accesses past an allocation), filled with 0xff bytes (NaN as float, −1 as int8) so that a
// read of memory nobody wrote shows in results; a capacity (LOCOST_CUDA_EMULATOR_MEMORY, bytes,
// default 16 GiB) makes cudaMalloc refuse as a full GPU would.
#pragma once
#include <math.h>  // the float overloads of exp, sqrt, ... in the global namespace, as device code calls them

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#ifndef LOCOST_CUDA_EMULATOR
#define LOCOST_CUDA_EMULATOR 1
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Kernel parameters are the launch's own copy on the host too.
#define __grid_constant__
// Shared memory: one object per (kernel, OS thread), which the fibers of a block share; blocks of
// one launch run one after another, so each block finds it as a GPU leaves it: unspecified.
#define __shared__ static thread_local

// ---- types of the CUDA runtime ------------------------------------------------------------------
struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct float2 {
    float x, y;
};
struct double2 {
    double x, y;
};

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorNoDevice = 100,
    cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
inline constexpr unsigned cudaStreamNonBlocking = 1;
struct locost_emulated_stream;
using cudaStream_t = locost_emulated_stream*;

struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount;
};

const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device);
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes);
cudaError_t cudaMalloc(void** p, std::size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t s);
// Events: the host's clock when recorded (a launch runs to completion before it returns).
struct locost_emulated_event;
using cudaEvent_t = locost_emulated_event*;
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width, std::size_t height,
                              cudaMemcpyKind kind, cudaStream_t s);

// ---- the execution model --------------------------------------------------------------------------
namespace locost_emulator {

inline thread_local uint3 thread_idx, block_idx;
inline thread_local dim3 block_dim, grid_dim;

// Runs body() as every thread of a grid×block launch on the calling thread; a bad configuration
// or a kernel fault becomes the sticky error the next call returns.
void launch(dim3 grid, dim3 block, cudaStream_t stream, void (*body)(void*), void* arg);
template <class F>
void launch(dim3 grid, dim3 block, cudaStream_t stream, F&& f) {
    launch(
        grid, block, stream, [](void* a) { (*static_cast<std::remove_reference_t<F>*>(a))(); }, static_cast<void*>(&f));
}

void sync_block();
// The calling thread's 16-byte slot in its warp's exchange: writes v, waits for the warp, reads lane
// src's (its own when src is out of the warp), waits again so that no slot is overwritten early.
void warp_exchange(unsigned mask, const void* v, void* out, std::size_t bytes, int src_lane, const char* what);

template <class T>
T shfl(unsigned mask, T v, int src_lane, const char* what) {
    static_assert(sizeof(T) <= 16 && std::is_trivially_copyable_v<T>, "a shuffled value is at most 16 bytes");
    T out;
    warp_exchange(mask, &v, &out, sizeof(T), src_lane, what);
    return out;
}

inline int lane_id() { return static_cast<int>(thread_idx.x % 32); }

}  // namespace locost_emulator

#define threadIdx (::locost_emulator::thread_idx)
#define blockIdx (::locost_emulator::block_idx)
#define blockDim (::locost_emulator::block_dim)
#define gridDim (::locost_emulator::grid_dim)

inline void __syncthreads() { locost_emulator::sync_block(); }

template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const int lane = locost_emulator::lane_id(), base = lane / width * width, src = lane + static_cast<int>(delta);
    return locost_emulator::shfl(mask, v, src < base + width ? src : lane, "__shfl_down_sync");
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    const int lane = locost_emulator::lane_id(), src = lane ^ lane_mask;
    return locost_emulator::shfl(mask, v, src / width == lane / width ? src : lane, "__shfl_xor_sync");
}

// ---- device functions -------------------------------------------------------------------------------
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
// The _rn intrinsics are the IEEE operations in round-to-nearest-even, the host's default mode.
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int __float2int_rn(float f) { return static_cast<int>(std::nearbyint(f)); }
// Byte i of the result is byte (s >> 4i) & 7 of the eight bytes of x (0-3) and y (4-7).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long v = (static_cast<unsigned long long>(y) << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
// The GPU's fast exp is exp2 of x·log2(e) in hardware; the host's exp stands in (the kernels'
// results are compared within float32 tolerances, not bit for bit).
inline float __expf(float x) { return std::exp(x); }

// CUDA's min and max of arithmetic types (fmax/fmin for floating types: a NaN operand loses).
template <class T>
requires std::is_arithmetic_v<T>
inline T max(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return std::fmax(a, b);
    else return a < b ? b : a;
}
template <class T>
requires std::is_arithmetic_v<T>
inline T min(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return std::fmin(a, b);
    else return b < a ? b : a;
}
