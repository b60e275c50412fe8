// S4D kernel generation on the GPU (layers/s4d_kernel.hpp states the math; the CPU backend's
// ssm_kernels.hpp computes the same numbers): powers of each mode and block starts by kernels,
// their products by one batched GEMM per group of channels.
#include <type_traits>

#include "grid.cuh"
#include "runtime.cuh"
#include "workspace.hpp"

namespace locost::cuda_detail {

namespace {

constexpr unsigned threads = grid_threads;

// exp(dtA·t) for dtA = (re, im), exactly in double (one exp and one sincos per element: no running
// products that would drift over 10^6 steps).
__device__ inline void cexp_scaled(double re, double im, double t, double& out_re, double& out_im) {
    const double mag = exp(re * t);
    double s, c;
    sincos(im * t, &s, &c);
    out_re = mag * c;
    out_im = mag * s;
}

// P[g][j] = [Re z^j | Im z^j] (T × N), z = exp(dtA[h0 + g, n]).
template <class T>
__global__ void fill_powers(const double* dtA, index_t modes, index_t h0, index_t G, index_t Tb, T* P) {
    const index_t N = 2 * modes;
    LOCOST_GRID_STRIDE(i, G * Tb * modes) {
        const index_t n = i % modes, j = (i / modes) % Tb, g = i / (modes * Tb);
        const double* a = dtA + 2 * ((h0 + g) * modes + n);
        double re, im;
        cexp_scaled(a[0], a[1], static_cast<double>(j), re, im);
        T* row = P + (g * Tb + j) * N;
        row[n] = static_cast<T>(re);
        row[modes + n] = static_cast<T>(im);
    }
}

// Q[g][c·blocks + b] = [Re w | −Im w], w = ceff[c, h0 + g, n]·z^(bT).
template <class T>
__global__ void fill_block_starts(const double* dtA, const double* ceff, index_t H, index_t modes, index_t channels, index_t h0, index_t G,
                                  index_t blocks, index_t Tb, T* Q) {
    const index_t N = 2 * modes;
    LOCOST_GRID_STRIDE(i, G * channels * blocks * modes) {
        const index_t n = i % modes, b = (i / modes) % blocks, c = (i / (modes * blocks)) % channels, g = i / (modes * blocks * channels);
        const double* a = dtA + 2 * ((h0 + g) * modes + n);
        const double* ce = ceff + 2 * ((c * H + h0 + g) * modes + n);
        double zr, zi;
        cexp_scaled(a[0], a[1], static_cast<double>(b * Tb), zr, zi);
        const double wr = ce[0] * zr - ce[1] * zi, wi = ce[0] * zi + ce[1] * zr;
        T* row = Q + ((g * channels + c) * blocks + b) * N;
        row[n] = static_cast<T>(wr);
        row[modes + n] = static_cast<T>(-wi);
    }
}

}  // namespace

template <class T>
void s4d_kernels(const double* dtA, const double* ceff, index_t H, index_t modes, index_t channels, index_t h0, index_t h1, index_t L,
                 T* out) {
    if (L <= 0 || h1 <= h0) return;
    const auto pass = cuda_workspace::s4d_pass::make(L, modes, channels, h1 - h0);
    const index_t Tb = pass.Tb, blocks = pass.blocks, N = pass.N, rows = pass.rows, step = pass.step;
    // From the caching allocator for this call, so that nothing stays held between encodes.
    tensor<T, cuda> Pbuf({step * Tb * N}), Qbuf({step * rows * N}), Kbuf({step * rows * Tb});
    T *P = Pbuf.data(), *Q = Qbuf.data(), *K = Kbuf.data();
    cublasHandle_t blas = cuda_context::current().blas();
    for (index_t a = h0; a < h1; a += step) {
        const index_t G = std::min(step, h1 - a);
        launch(fill_powers<T>, grid_of(G * Tb * modes), threads, "fill_powers", dtA, modes, a, G, Tb, P);
        launch(fill_block_starts<T>, grid_of(G * rows * modes), threads, "fill_block_starts", dtA, ceff, H, modes, channels, a, G, blocks,
               Tb, Q);
        // Per channel: K (rows × Tb) = 2·Q (rows × N)·Pᵀ, as the column-major Kᵀ = 2·P·Qᵀ.
        const T two = 2, zero = 0;
        if constexpr (std::is_same_v<T, double>)
            check(cublasDgemmStridedBatched(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(Tb), static_cast<int>(rows),
                                            static_cast<int>(N), &two, P, static_cast<int>(N), Tb * N, Q, static_cast<int>(N), rows * N,
                                            &zero, K, static_cast<int>(Tb), rows * Tb, static_cast<int>(G)),
                  "cublasDgemmStridedBatched (S4D kernels)");
        else
            check(cublasSgemmStridedBatched(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(Tb), static_cast<int>(rows),
                                            static_cast<int>(N), &two, P, static_cast<int>(N), Tb * N, Q, static_cast<int>(N), rows * N,
                                            &zero, K, static_cast<int>(Tb), rows * Tb, static_cast<int>(G)),
                  "cublasSgemmStridedBatched (S4D kernels)");
        // Row (g, c) of K holds K[c, h, 0..blocks·Tb): keep its first L.
        copy_2d(out + (a - h0) * channels * L, static_cast<std::size_t>(L) * sizeof(T), K,
                static_cast<std::size_t>(blocks * Tb) * sizeof(T), static_cast<std::size_t>(L) * sizeof(T),
                static_cast<std::size_t>(G * channels));
    }
}

template void s4d_kernels<float>(const double*, const double*, index_t, index_t, index_t, index_t, index_t, index_t, float*);
template void s4d_kernels<double>(const double*, const double*, index_t, index_t, index_t, index_t, index_t, index_t, double*);

}  // namespace locost::cuda_detail
