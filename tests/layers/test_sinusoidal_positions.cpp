// Sinusoidal positions (layers/sinusoidal_positions.hpp) against the formulas in double.
#include "models/locost_encoder.hpp"

#include <cmath>

// Sinusoidal positions under both frequency rules, against the formulas in double precision:
// Pegasus-X's timing signal (ω_k = 10000^(−k/(H/2−1))) and the Transformer's (ω_k = 10000^(−2k/H)).
TEST_CASE("layers: sinusoidal positions under the timing-signal and the Transformer's frequency rule") {
    const index_t H = 16, T = 5, first = 3;
    for (const auto rule : {locost::layers::frequency_rule::timing_signal, locost::layers::frequency_rule::transformer}) {
        const locost::layers::sinusoidal_positions<float, cpu> pe(H, rule);
        tensor<float> x({T, H}, 0.0f);
        pe.add(x.data(), 1, T, first);
        for (index_t t = 0; t < T; ++t)
            for (index_t k = 0; k < H / 2; ++k) {
                const double w = rule == locost::layers::frequency_rule::timing_signal
                    ? std::pow(10000.0, -static_cast<double>(k) / (H / 2 - 1))
                    : std::pow(10000.0, -2.0 * static_cast<double>(k) / H);
                const double a = static_cast<double>(first + t) * w;
                CHECK(x[t * H + k] == doctest::Approx(std::sin(a)).epsilon(1e-5));
                CHECK(x[t * H + H / 2 + k] == doctest::Approx(std::cos(a)).epsilon(1e-5));
            }
    }
    // The rules differ past the first frequency.
    const auto a = locost::layers::sinusoid_frequencies(H, locost::layers::frequency_rule::timing_signal),
               b = locost::layers::sinusoid_frequencies(H, locost::layers::frequency_rule::transformer);
    CHECK(a[0] == b[0]);
    CHECK(a[3] != doctest::Approx(b[3]));
}
