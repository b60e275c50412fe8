// The device side of a tool built with the CUDA backend (-DLOCOST_CUDA=ON): the GPUs from
// locost::cuda_devices(), and the commands' model code instantiated with locost::cuda. Host
// code: cuda.hpp declares the backend's ops, the locost::locost_cuda library's .cu files define them.
#include <locost/locost.hpp>
#include <locost/backend/cuda/cuda.hpp>

#include "commands.hpp"

namespace locost::cli {

std::vector<gpu_properties> cuda_devices() { return locost::cuda_devices(); }

std::string gpu_memory_note() {
    const auto m = cuda_detail::memory_stats();
    char buf[128];
    std::snprintf(buf, sizeof buf, "; GPU memory peak %.2f GB held (%.2f GB in tensors)", static_cast<double>(m.peak_reserved) / 1e9,
                  static_cast<double>(m.peak) / 1e9);
    return buf;
}

encode_result encode_on_cuda(const io::checkpoint& ck, const models::model_options& opts, const batch_input& in,
                             const models::progress_callback& progress) {
    return encode_on<cuda>(ck, opts, in, progress);
}
tensor<float> score_on_cuda(const io::checkpoint& ck, const models::model_options& opts, const batch_input& enc,
                            const std::vector<std::int64_t>& dec_ids, index_t T, const models::progress_callback& progress) {
    return score_on<cuda>(ck, opts, enc, dec_ids, T, progress);
}
generator make_generator_cuda(const args& a, const io::checkpoint& ck, const models::model_options& mo,
                              const generation::generation_options& go) {
    return make_generator<cuda>(a, ck, mo, go);
}

}  // namespace locost::cli
