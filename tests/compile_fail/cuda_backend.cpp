// Must NOT compile: without the CUDA backend's header (locost/backend/cuda/cuda.hpp, which
// declares its kernels), asking for a model on locost::cuda stops at the backend's named
// static_assert (tests/CMakeLists.txt checks the message).
#include <locost/locost.hpp>

int main() {
    const auto ck = locost::io::checkpoint::open("unused");
    auto encoder = locost::models::load_encoder<float, locost::cuda>(ck);
    return 0;
}
