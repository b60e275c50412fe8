// Shared by the tests of the LOCOST encoder and its parts (tests/layers/test_s4d_kernel.cpp,
// tests/ops/test_bidirectional_conv.cpp, tests/models/test_locost_encoder.cpp,
// tests/layers/test_sinusoidal_positions.cpp): the (backend, scalar) configurations each body runs
// under, the encoder's loader and the S4D kernels of a LOCOST checkpoint.
#pragma once
#include "helpers.hpp"

#include <string>
#include <vector>

namespace {

using namespace test;
using locost::cpu;
using locost::tensor;

template <class Backend, class Scalar>
struct config {
    using backend = Backend;
    using scalar = Scalar;
};
#define LOCOST_CONFIGS config<locost::cpu, float>, config<locost::cpu, double>

// Tolerance of a (backend, scalar) configuration against references made in float32.
template <class Scalar>
constexpr double tolerance = parity;

template <class Backend, class Scalar>
locost::models::any_encoder<Scalar, Backend> load(const std::string& dir, locost::models::encoder_options o = {}) {
    locost::models::model_options m;
    m.encoder = o;
    return locost::models::load_encoder<Scalar, Backend>(locost::io::checkpoint::open(dir), m);
}

// The S4D kernels of a LOCOST checkpoint's layers, read as its encoder reads them.
template <class Scalar>
class checkpoint_kernels {
public:
    explicit checkpoint_kernels(const std::string& dir) : ck_(locost::io::checkpoint::open(dir)), c_(config_of(ck_)) {}
    const locost::models::locost_config& config() const { return c_; }
    // K[c, h, 0..L) of layer `layer`: (channels, L).
    std::vector<Scalar> operator()(index_t layer, index_t h, index_t L) const {
        locost::layers::checkpoint_reader reader(ck_);
        const locost::layers::tensor_source root(reader);
        const auto at = locost::models::t5_layout::layer(root, locost::layers::model_stack::encoder, layer, 0) / "ssm_layer" / "kernel";
        const locost::layers::s4d_kernel<Scalar, cpu> k(
            locost::layers::s4d_kernel_parameters::read(at, c_.bidirectional ? 2 : 1, c_.d_model, c_.d_state / 2));
        std::vector<Scalar> out(static_cast<std::size_t>(k.channels() * L));
        typename locost::layers::s4d_kernel<Scalar, cpu>::scratch s;
        k.compute(h, L, out.data(), s);
        return out;
    }

private:
    locost::io::checkpoint ck_;
    locost::models::locost_config c_;
};

}  // namespace
