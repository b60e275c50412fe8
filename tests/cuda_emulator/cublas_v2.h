// cuBLAS as tests/cuda_emulator emulates it on the host (see emulator.hpp): the GEMMs the CUDA
// backend calls, column-major, with cuBLAS's argument checks (a leading dimension shorter than
// its matrix's rows is CUBLAS_STATUS_INVALID_VALUE) and its beta = 0 rule (C is not read).
#pragma once
#include "emulator.hpp"

enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_8I = 3, CUDA_R_32I = 10, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32I = 72 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

struct locost_emulated_blas;
using cublasHandle_t = locost_emulated_blas*;

cublasStatus_t cublasCreate(cublasHandle_t* h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha,
                           const float* a, int lda, const float* b, int ldb, const float* beta, float* c, int ldc);
cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const double* alpha,
                           const double* a, int lda, const double* b, int ldb, const double* beta, double* c, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                         const float* alpha, const float* a, int lda, long long sa, const float* b, int ldb, long long sb,
                                         const float* beta, float* c, int ldc, long long sc, int batch);
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                         const double* alpha, const double* a, int lda, long long sa, const double* b, int ldb,
                                         long long sb, const double* beta, double* c, int ldc, long long sc, int batch);
// Only what the backend uses: bfloat16 A and B with float32 C and sums; int8 A and B with int32 C
// and sums, under the conditions cuBLAS documents for that path (see emulator.cpp).
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                            const void* a, cudaDataType ta_type, int lda, const void* b, cudaDataType tb_type, int ldb, const void* beta,
                            void* c, cudaDataType tc_type, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo);
