// cuFFT as tests/cuda_emulator emulates it on the host (see emulator.hpp): batched 1-D real
// transforms in the basic data layout (cufftPlanMany with null embeddings), computed by FFTW,
// unnormalised in both directions as cuFFT's are.
#pragma once
#include "emulator.hpp"

enum cufftResult {
    CUFFT_SUCCESS = 0,
    CUFFT_INVALID_PLAN = 1,
    CUFFT_ALLOC_FAILED = 2,
    CUFFT_INVALID_VALUE = 4,
    CUFFT_EXEC_FAILED = 6,
    CUFFT_INVALID_SIZE = 8,
    CUFFT_NOT_SUPPORTED = 16,
};
enum cufftType { CUFFT_R2C = 0x2a, CUFFT_C2R = 0x2c, CUFFT_D2Z = 0x6a, CUFFT_Z2D = 0x6c };
using cufftHandle = int;
using cufftReal = float;
using cufftDoubleReal = double;
using cufftComplex = float2;
using cufftDoubleComplex = double2;

cufftResult cufftPlanMany(cufftHandle* plan, int rank, int* n, int* inembed, int istride, int idist, int* onembed, int ostride, int odist,
                          cufftType type, int batch);
cufftResult cufftSetStream(cufftHandle plan, cudaStream_t s);
cufftResult cufftDestroy(cufftHandle plan);
cufftResult cufftExecR2C(cufftHandle plan, cufftReal* in, cufftComplex* out);
cufftResult cufftExecC2R(cufftHandle plan, cufftComplex* in, cufftReal* out);
cufftResult cufftExecD2Z(cufftHandle plan, cufftDoubleReal* in, cufftDoubleComplex* out);
cufftResult cufftExecZ2D(cufftHandle plan, cufftDoubleComplex* in, cufftDoubleReal* out);
