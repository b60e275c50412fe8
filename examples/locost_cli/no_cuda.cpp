// The device query of a tool built without the CUDA backend (the default, -DLOCOST_CUDA=OFF).
#include <locost/backend/device.hpp>
#include <locost/config/error.hpp>

#include <vector>

namespace locost::cli {

std::vector<gpu_properties> cuda_devices() {
    throw error("device.no_cuda_build",
                "--device cuda: this locost was built without the CUDA backend (configure with -DLOCOST_CUDA=ON; it needs nvcc)");
}

} // namespace locost::cli
