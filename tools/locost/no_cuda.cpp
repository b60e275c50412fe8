// The device side of a tool built without the CUDA backend (the default, -DLOCOST_CUDA=OFF):
// every --device cuda entry point says so.
#include "commands.hpp"

namespace locost::cli {

namespace {
[[noreturn]] void no_cuda_build() {
    throw error("device.no_cuda_build",
                "--device cuda: this locost was built without the CUDA backend (configure with -DLOCOST_CUDA=ON; it needs nvcc)");
}
}  // namespace

std::vector<gpu_properties> cuda_devices() { no_cuda_build(); }
std::string gpu_memory_note() { no_cuda_build(); }
encode_result encode_on_cuda(const io::checkpoint&, const models::model_options&, const batch_input&, const models::progress_callback&) {
    no_cuda_build();
}
tensor<float> score_on_cuda(const io::checkpoint&, const models::model_options&, const batch_input&, const std::vector<std::int64_t>&,
                            index_t, const models::progress_callback&) {
    no_cuda_build();
}
generator make_generator_cuda(const args&, const io::checkpoint&, const models::model_options&, const generation::generation_options&) {
    no_cuda_build();
}

}  // namespace locost::cli
