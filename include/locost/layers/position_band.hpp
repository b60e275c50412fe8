// An attention bias that depends on the distance between key and query only, kept as a Toeplitz
// band: for a query at position i and a key at position j, r = j − i,
//
//     bias_h(i, j) = band_h(r),      r ∈ [−(reach − 1), reach − 1]
//
// once per head (or once for all heads), in the backend's memory. Every bias of that form in the
// library is one: T5's relative position bias (bidirectional in the encoder; in the decoder with
// −∞ for r > 0, the causal mask), a sliding window (−∞ outside |r| ≤ radius, LongT5's relative
// bias inside), BART's and Pegasus-X's bare causal mask (0 or −∞, no heads), and LongT5's bias
// on its transient global tokens (r in blocks). ops::attention reads a band with ldb = −1: a
// problem whose queries start at i0 and keys at k0 passes at(h, k0 − i0), and nothing is filled
// per query, per row or per call; the band is made on the host once per reach (it grows with the
// longest input or decoding capacity seen) and uploaded once.
#pragma once
#include <algorithm>
#include <limits>

#include "../backend/transfer.hpp"
#include "../core/tensor.hpp"

namespace locost::layers {

template <class Scalar, class Backend>
class position_band {
public:
    static constexpr float masked = -std::numeric_limits<float>::infinity();

    // Makes the band cover distances up to reach − 1 for `heads` heads (0: one band shared by every
    // head); value(r, h) gives band_h(r) (masked for −∞). Kept when it already covers them.
    template <class Value>
    void ensure(index_t reach, index_t heads, const Value& value) {
        if (reach <= reach_ && heads == heads_) return;
        const index_t n = std::max<index_t>(heads, 1), width = 2 * reach - 1;
        tensor<float> host({n, width});
        for (index_t h = 0; h < n; ++h)
            for (index_t r = -(reach - 1); r < reach; ++r) host[h * width + reach - 1 + r] = static_cast<float>(value(r, h));
        band_ = to_backend<Scalar, Backend>(std::move(host));
        reach_ = reach, heads_ = heads;
    }

    // Head h's band seen from distance r0: at(h, r0)[d] = band_h(r0 + d), for the distances the
    // band covers.
    const Scalar* at(index_t h, index_t r0) const noexcept {
        return band_.data() + (heads_ > 0 ? h : 0) * (2 * reach_ - 1) + reach_ - 1 + r0;
    }
    index_t reach() const noexcept { return reach_; }

private:
    tensor<Scalar, Backend> band_;
    index_t reach_ = 0, heads_ = -1;
};

}  // namespace locost::layers
