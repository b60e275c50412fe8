// The model a Python Model runs, on the device it was loaded on: the calls the module makes,
// whatever the backend. The CPU's is made in model.hpp; the GPU's in cuda_model.cpp when
// the module is built with the CUDA backend (-DLOCOST_CUDA=ON), else no_cuda.cpp says it was not
// (device.no_cuda_build), as the tool does. Results always come back in host memory.
#pragma once
// clang-format off
#include <locost/locost.hpp>
#include <tools/locost/args.hpp>
#include <tools/locost/input.hpp>  // (the tool's headers expect the library's and args.hpp before them)
// clang-format on

#include <chrono>
#include <memory>
#include <utility>

namespace locost::python {

class device_model {
public:
    virtual ~device_model() = default;
    virtual const models::family_traits& family() const = 0;
    virtual void set_prefix_length(index_t n) = 0;
    virtual tensor<float> encoder_states(const std::int64_t* ids, const float* mask, index_t B, index_t L,
                                         const models::progress_callback& p) = 0;
    virtual tensor<float> score(const std::int64_t* ids, const float* mask, index_t B, index_t L, const std::int64_t* decoder_ids,
                                index_t T, const models::progress_callback& p) = 0;
    // Encodes the batch (each row alone when in.encode_each) and generates; encode_seconds gets
    // the encode's wall time.
    virtual generation::generation_result generate(const cli::batch_input& in, const float* mask, const generation::generation_options& go,
                                                   const models::progress_callback& p, const generation::step_callback& on_step,
                                                   double& encode_seconds) = 0;
};

template <class Backend>
class backend_model final : public device_model {
public:
    explicit backend_model(models::any_model<float, Backend> m) : m_(std::move(m)) {}
    const models::family_traits& family() const override { return m_.family(); }
    void set_prefix_length(index_t n) override { m_.set_prefix_length(n); }
    tensor<float> encoder_states(const std::int64_t* ids, const float* mask, index_t B, index_t L,
                                 const models::progress_callback& p) override {
        return host_tensor(m_.encoder_states(ids, mask, B, L, p));
    }
    tensor<float> score(const std::int64_t* ids, const float* mask, index_t B, index_t L, const std::int64_t* decoder_ids, index_t T,
                        const models::progress_callback& p) override {
        return m_.score(ids, mask, B, L, decoder_ids, T, p);
    }
    generation::generation_result generate(const cli::batch_input& in, const float* mask, const generation::generation_options& go,
                                           const models::progress_callback& p, const generation::step_callback& on_step,
                                           double& encode_seconds) override {
        const auto t0 = std::chrono::steady_clock::now();
        const auto encoded = in.encode_each ? models::encode_each(m_, in.rows, p) : m_.encode(in.ids.data(), mask, in.B, in.L, p);
        encode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return generation::generate(m_, encoded, in.rows, go, on_step);
    }

private:
    models::any_model<float, Backend> m_;
};

// The model on the first GPU (cuda_model.cpp), or device.no_cuda_build (no_cuda.cpp).
std::unique_ptr<device_model> load_cuda_model(const io::checkpoint& ck, const models::model_options& mo);

}  // namespace locost::python
