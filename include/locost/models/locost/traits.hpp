// Compile-time structure of a LOCOST model.
//
// locost_traits fixes everything that changes the arithmetic's shape: scalar type, backend,
// whether the S4D convolution is bidirectional, whether the gate q exists, and the
// feed-forward's activation and gating. dispatch_locost() reads a locost_config and calls
// f.template operator()<Traits>() with the matching traits; only models/registry.hpp calls it.
#pragma once
#include <utility>

#include "../../backend/backend.hpp"
#include "../../config/error.hpp"
#include "../../ops/elementwise.hpp"
#include "config.hpp"

namespace locost::models {

template <class Scalar, class Backend, bool Bidirectional, bool Gating, activation Act, bool GatedFF>
struct locost_traits {
    static_assert(locost::scalar<Scalar>, "locost_traits: Scalar must be float or double");
    static_assert(locost::backend<Backend>, "locost_traits: Backend must be a backend (locost::cpu, locost::cuda, or a type declared by specialising locost::is_backend)");
    using scalar = Scalar;
    using backend = Backend;
    static constexpr bool bidirectional = Bidirectional;  // kernel.C has 2 channels (fwd, bwd)
    static constexpr bool gating = Gating;                // q_proj present
    static constexpr activation act = Act;                // feed-forward activation
    static constexpr bool gated_ff = GatedFF;             // wi_0/wi_1 (gated) or wi
};

namespace detail {
template <bool B, class F>
decltype(auto) bool_switch(bool v, F&& f) {
    if (v) return f(std::true_type{});
    return f(std::false_type{});
}
template <class F>
decltype(auto) act_switch(activation a, F&& f) {
    switch (a) {
    case activation::relu: return f(std::integral_constant<activation, activation::relu>{});
    case activation::gelu_tanh: return f(std::integral_constant<activation, activation::gelu_tanh>{});
    case activation::gelu_erf: return f(std::integral_constant<activation, activation::gelu_erf>{});
    case activation::silu: break;
    }
    return f(std::integral_constant<activation, activation::silu>{});
}
} // namespace detail

// f.template operator()<locost_traits<...>>() for the structure `c` describes.
template <class Scalar, class Backend, class F>
decltype(auto) dispatch_locost(const locost_config& c, const std::string& source, F&& f) {
    const activation act = activation_named(c.dense_act_fn, source);
    return detail::bool_switch<true>(c.bidirectional, [&](auto bidir) -> decltype(auto) {
        return detail::bool_switch<true>(c.gating, [&](auto gate) -> decltype(auto) {
            return detail::bool_switch<true>(c.is_gated_act, [&](auto gated_ff) -> decltype(auto) {
                return detail::act_switch(act, [&](auto a) -> decltype(auto) {
                    using traits = locost_traits<Scalar, Backend, decltype(bidir)::value, decltype(gate)::value,
                                                 decltype(a)::value, decltype(gated_ff)::value>;
                    return f.template operator()<traits>();
                });
            });
        });
    });
}

} // namespace locost::models
