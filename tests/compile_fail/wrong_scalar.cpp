// Must NOT compile: the library computes in float or double only.
#include <locost/locost.hpp>

int main() {
    using traits = locost::models::locost_traits<int, locost::cpu, true, true, locost::activation::relu, false>;
    return sizeof(traits);
}
