// The device query of a tool built with the CUDA backend (-DLOCOST_CUDA=ON): locost::cuda_devices()
// from the locost::locost_cuda library. Host code: cuda.hpp declares, the library's .cu files define.
#include <locost/locost.hpp>
#include <locost/backend/cuda/cuda.hpp>

#include "args.hpp"
#include "device.hpp"

namespace locost::cli {

std::vector<gpu_properties> cuda_devices() { return locost::cuda_devices(); }

} // namespace locost::cli
