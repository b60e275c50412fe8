// The GPU side of a Python module built without the CUDA backend (the default): device='cuda'
// says so.
#include "module/device_model.hpp"

namespace locost::cli {
std::vector<gpu_properties> cuda_devices() {
    throw error("device.no_cuda_build", "device='cuda': this locost Python module was built without the CUDA backend (it runs on the CPU)");
}
}  // namespace locost::cli

namespace locost::python {
std::unique_ptr<device_model> load_cuda_model(const io::checkpoint&, const models::model_options&) {
    cli::cuda_devices();
    return nullptr;
}
}  // namespace locost::python
