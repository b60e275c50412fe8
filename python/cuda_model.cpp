// The GPU side of a Python module built with the CUDA backend (-DLOCOST_CUDA=ON): the GPUs from
// locost::cuda_devices(), and models instantiated with locost::cuda. Host code: cuda.hpp declares
// the backend's ops, the locost::locost_cuda library's .cu files define them.
#include <locost/backend/cuda/cuda.hpp>

#include "module/device_model.hpp"

namespace locost::cli {
std::vector<gpu_properties> cuda_devices() { return locost::cuda_devices(); }
}  // namespace locost::cli

namespace locost::python {
std::unique_ptr<device_model> load_cuda_model(const io::checkpoint& ck, const models::model_options& mo) {
    return std::make_unique<backend_model<cuda>>(models::load_model<float, cuda>(ck, mo));
}
}  // namespace locost::python
