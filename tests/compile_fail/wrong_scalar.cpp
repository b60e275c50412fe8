// Must NOT compile: the library computes in float or double only.
#include <locost/locost.hpp>

int main() {
    const auto ck = locost::io::checkpoint::open("unused");
    auto model = locost::models::load_model<int>(ck);
    return 0;
}
