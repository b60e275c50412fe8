// The bidirectional FFT convolution on the GPU (ops/bidirectional_conv.hpp states the conventions;
// the CPU backend's bidirectional_conv.hpp computes the same numbers): circular kernels, cuFFT
// transforms per group of channels, the spectra multiplied, the columns scattered back.
#include <map>
#include <tuple>
#include <type_traits>

#include "grid.cuh"
#include "runtime.cuh"
#include "workspace.hpp"

namespace locost::cuda_detail {

namespace {

constexpr unsigned threads = grid_threads;


// Circular kernels of a group (ops::circular_kernel, one element per thread, gathered so no two
// threads write one place), scaled by 1/M so that the inverse transform needs no pass of its own.
template <class T>
__global__ void circular_kernels(const T* kern, index_t L, index_t channels, index_t M, index_t anchor, index_t g, index_t G, T* c) {
    const T inv_m = T(1) / static_cast<T>(M);
    LOCOST_GRID_STRIDE(i, G * M) {
        const index_t k = i / M, p = i % M;
        T val = 0;
        if (k < g) {
            const T* kf = kern + k * channels * L;
            if (p < L) val = kf[p];
            if (channels > 1) {
                const T* kb = kf + L;
                if (p == 0) val += kb[0];
                else if (anchor - p >= 1 && anchor - p < L) val += kb[anchor - p];
            }
        }
        c[i] = val * inv_m;
    }
}

// sig[k][l] = v[l, h0 + k] for l < L and k < g, else 0. Threads run along k so reads of v coalesce.
template <class T>
__global__ void gather_columns(const T* v, index_t L, index_t H, index_t h0, index_t g, index_t G, index_t M, T* sig) {
    LOCOST_GRID_STRIDE(i, G * M) {
        const index_t k = i % G, l = i / G;
        sig[k * M + l] = (k < g && l < L) ? v[l * H + h0 + k] : T(0);
    }
}

// y[l, h0 + k] = sig[k][l] + D[h0 + k]·v[l, h0 + k]; v is read before y is written (they may alias).
template <class T>
__global__ void scatter_columns(const T* sig, const T* v, const T* D, index_t L, index_t H, index_t h0, index_t g, index_t M, T* y) {
    LOCOST_GRID_STRIDE(i, g * L) {
        const index_t k = i % g, l = i / g;
        const index_t at = l * H + h0 + k;
        y[at] = sig[k * M + l] + D[h0 + k] * v[at];
    }
}

template <class C>
__global__ void multiply_spectra(C* spec, const C* kspec, index_t count) {
    LOCOST_GRID_STRIDE(i, count) {
        const C a = spec[i], b = kspec[i];
        spec[i] = {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x};
    }
}

#undef LOCOST_GRID_STRIDE

// cuFFT plans by (size, batch, direction, precision), per host thread (a plan is not to be used
// by two threads at once); made on first use and kept, as FFTW's wisdom is on the CPU.
template <class T>
cufftHandle fft_plan(index_t M, index_t G, bool forward) {
    thread_local std::map<std::tuple<index_t, index_t, bool>, cufftHandle> plans;
    const auto key = std::make_tuple(M, G, forward);
    if (auto it = plans.find(key); it != plans.end()) return it->second;
    if (M > std::numeric_limits<int>::max() || G > std::numeric_limits<int>::max())
        throw error("cuda.fft_too_large", "an FFT of " + std::to_string(M) + " points exceeds cuFFT's 32-bit sizes");
    int n = static_cast<int>(M);
    const int Mc = static_cast<int>(M / 2 + 1);
    constexpr bool dbl = std::is_same_v<T, double>;
    const cufftType type = forward ? (dbl ? CUFFT_D2Z : CUFFT_R2C) : (dbl ? CUFFT_Z2D : CUFFT_C2R);
    cufftHandle h = 0;
    check(cufftPlanMany(&h, 1, &n, nullptr, 1, forward ? n : Mc, nullptr, 1, forward ? Mc : n, type, static_cast<int>(G)),
          "cufftPlanMany(" + std::to_string(M) + " points, batch " + std::to_string(G) + ")");
    plans.emplace(key, h);
    return h;
}

template <class T>
void rfft(cufftHandle h, T* in, std::complex<T>* out) {
    check(cufftSetStream(h, cuda_context::current().stream()), "cufftSetStream");
    if constexpr (std::is_same_v<T, double>) check(cufftExecD2Z(h, in, reinterpret_cast<cufftDoubleComplex*>(out)), "cufftExecD2Z");
    else check(cufftExecR2C(h, in, reinterpret_cast<cufftComplex*>(out)), "cufftExecR2C");
}

template <class T>
void irfft(cufftHandle h, std::complex<T>* in, T* out) {
    check(cufftSetStream(h, cuda_context::current().stream()), "cufftSetStream");
    if constexpr (std::is_same_v<T, double>) check(cufftExecZ2D(h, reinterpret_cast<cufftDoubleComplex*>(in), out), "cufftExecZ2D");
    else check(cufftExecC2R(h, reinterpret_cast<cufftComplex*>(in), out), "cufftExecC2R");
}

}  // namespace

template <class T>
conv_plan<T>::conv_plan(const ops::conv_geometry& geo, index_t L, index_t H, index_t channels)
    : geo_(geo), L_(L), H_(H), channels_(channels), G_(cuda_workspace::conv_group(geo.M, H)), kern_({G_ * channels * L}),
      sig_({G_ * geo.M}), kspec_({G_ * (geo.M / 2 + 1)}), spec_({G_ * (geo.M / 2 + 1)}) {
    forward_ = fft_plan<T>(geo.M, G_, true);
    inverse_ = fft_plan<T>(geo.M, G_, false);
}

template <class T>
conv_plan<T>::~conv_plan() = default;  // the plans stay cached for the next call

template <class T>
void conv_plan<T>::run_group(const T* v, T* y, index_t batch, index_t h0, index_t h1, const T* D) {
    const index_t M = geo_.M, Mc = M / 2 + 1, g = h1 - h0, LH = L_ * H_;
    launch(circular_kernels<T>, grid_of(G_ * M), threads, "circular_kernels", kern_.data(), L_, channels_, M, geo_.anchor, g, G_,
           sig_.data());
    rfft<T>(forward_, sig_.data(), kspec_.data());
    using C = std::conditional_t<std::is_same_v<T, double>, double2, float2>;
    for (index_t b = 0; b < batch; ++b) {
        launch(gather_columns<T>, grid_of(G_ * M), threads, "gather_columns", v + b * LH, L_, H_, h0, g, G_, M, sig_.data());
        rfft<T>(forward_, sig_.data(), spec_.data());
        launch(multiply_spectra<C>, grid_of(G_ * Mc), threads, "multiply_spectra", reinterpret_cast<C*>(spec_.data()),
               reinterpret_cast<const C*>(kspec_.data()), G_ * Mc);
        irfft<T>(inverse_, spec_.data(), sig_.data());
        launch(scatter_columns<T>, grid_of(g * L_), threads, "scatter_columns", sig_.data(), v + b * LH, D, L_, H_, h0, g, M, y + b * LH);
    }
}

template class conv_plan<float>;
template class conv_plan<double>;

}  // namespace locost::cuda_detail
