// Must NOT compile: the CUDA backend has no kernels yet, so asking for a model on it stops at
// the backend's named static_assert (tests/CMakeLists.txt checks the message).
#include <locost/locost.hpp>

int main() {
    const auto ck = locost::io::checkpoint::open("unused");
    auto encoder = locost::models::load_locost_encoder<locost::cuda>(ck);
    return 0;
}
