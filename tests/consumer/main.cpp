// Consumes locost through its one target and umbrella header, and runs one op.
#include <locost/locost.hpp>

#include <cstdio>

int main() {
    locost::tensor<float> x({2, 3}, 1.5f);
    std::printf("locost %s, %lld elements, first %.1f\n", LOCOST_VERSION_STRING,
                static_cast<long long>(x.numel()), static_cast<double>(x[0]));
    return x.numel() == 6 ? 0 : 1;
}
