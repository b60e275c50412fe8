// Local attention with global tokens — simple-local-attentions.txt §2 (sliding windows; blocks with
// and without overlap), as LongT5 (local, transient-global), LED (Longformer) and Pegasus-X use it:
//
//     ctx_i = Σ_{j ∈ W(i) ∪ G}  softmax_j( q_i·k_jᵀ + β(i, j) ) · v_j
//
//     W(i) = { j : |i − j| ≤ r }                        sliding window of radius r (LED: w/2; LongT5
//                                                       local: r = local_radius, which is what its
//                                                       3-block computation with |i − j| < b gives)
//          = { j : ⌊(j + s)/b⌋ = ⌊(i + s)/b⌋ }           disjoint blocks of b shifted by s (Pegasus-X;
//                                                       s = b/2 on its staggered layers)
//     G    the global keys: a second key/value segment every query of a row also sees (LED's chosen
//          tokens, LongT5's transient block sums, Pegasus-X's learned tokens)
//     β    T5's relative bias of j − i (or nothing) on W(i); −∞ for masked keys (padding, LED's
//          global positions, which reach every query through G instead); a per-row bias on G
//          (LongT5's global relative bias, the same for all queries of one transient block)
//
// Queries are taken in groups of `query_block`; a group's keys are the union of its windows
// (≤ query_block + 2r keys, or one block), so scores and biases take O(L·(query_block + 2r + |G|))
// and no L × L matrix ever exists. Every group of every row and head is one problem of the
// attention op (ops/attention.hpp) with G as its second segment. The window and the relative
// bias depend on j − i only, so they are one short vector per head (a position_band, made once)
// read as a Toeplitz band (ldb = −1), and the padding is one key bias per input (padding_bias):
// nothing is filled per query.
//
// Lengths need not be multiples of anything: the windows are clipped to [0, L), which is what
// the references' internal padding (masked keys) amounts to on the real tokens. Outputs at padded
// query positions are unspecified (finite); the references' are too.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include "../backend/transfer.hpp"
#include "../ops/attention.hpp"
#include "../ops/rows.hpp"
#include "kv_cache.hpp"
#include "position_band.hpp"

namespace locost::layers {

inline index_t floor_div(index_t a, index_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// W(i) = [i − r, i + r].
struct sliding_window {
    index_t radius = 0;

    index_t span_begin(index_t i0) const { return i0 - radius; }  // first key of queries [i0, i1)
    index_t span_end(index_t i1) const { return i1 + radius; }    // one past their last key
    index_t group_end(index_t i0, index_t block) const { return i0 + block; }
    index_t max_distance(index_t block) const { return block - 1 + radius; }
    bool within(index_t delta) const { return delta >= -radius && delta <= radius; }
};

// W(i) = the block of b holding i, blocks starting at k·b − s.
struct disjoint_blocks {
    index_t block = 1, shift = 0;

    index_t start_of(index_t i) const { return floor_div(i + shift, block) * block - shift; }
    index_t span_begin(index_t i0) const { return start_of(i0); }
    index_t span_end(index_t i1) const { return start_of(i1 - 1) + block; }
    index_t group_end(index_t i0, index_t qb) const { return std::min(start_of(i0) + block, i0 + qb); }  // never crosses a block
    index_t max_distance(index_t) const { return block - 1; }
    bool within(index_t) const { return true; }  // the span is the block
};

// The padding of B rows of L keys as the bias attention adds to a key's score: 0 for a real key,
// −∞ for padding (ops::key_bias from the mask, in the backend's memory).
template <class Scalar, class Backend>
class padding_bias {
public:
    // mask (n) of 0/1 on the host, or nullptr: no bias at all, unless `always` (a caller that
    // masks more keys itself, LED's global positions, wants zeros to mask them in). A mask with
    // no padding is no bias either: adding zeros would cost a pass over every score row.
    void prepare(const float* mask, index_t n, bool always = false) {
        active_ = (mask && std::find(mask, mask + n, 0.0f) != mask + n) || always;
        if (!active_) return;
        if (bias_.numel() < n) bias_ = tensor<Scalar, Backend>({n});
        const backend_array<float, Backend> m(mask, n);  // a device reads its own copy
        ops::key_bias<Backend>(m.data(), n, bias_.data());
    }
    // (n) values, or nullptr when there is no padding.
    const Scalar* data() const noexcept { return active_ ? bias_.data() : nullptr; }
    Scalar* data() noexcept { return active_ ? bias_.data() : nullptr; }

private:
    tensor<Scalar, Backend> bias_;
    bool active_ = false;
};

// What every block of an encoder whose attention sees the whole input reads for one input: the
// padding as a key bias, the stack's position bias as a band over the input's distances (empty
// where there is none), and the query block the attention takes queries in.
template <class Scalar, class Backend>
struct dense_attention_inputs {
    padding_bias<Scalar, Backend> padding;
    position_band<Scalar, Backend> band;
    index_t query_block = 512;
};

// q, k, v of B rows of L positions: position i of row b, head h at base + (b·L + i)·ld + h·d.
template <class Scalar>
struct local_qkv {
    const Scalar *q = nullptr, *k = nullptr, *v = nullptr;
    index_t ldq = 0, ldk = 0, ldv = 0;
};

// The global keys/values: row b's j-th at k/v + b·row_stride + j·ld + h·d, count[b] of them
// (empty: no global segment).
template <class Scalar>
struct global_segment {
    const Scalar *k = nullptr, *v = nullptr;
    index_t ld = 0, row_stride = 0;
    std::vector<index_t> count;

    bool empty() const { return count.empty(); }
    index_t max_count() const { return count.empty() ? 0 : *std::max_element(count.begin(), count.end()); }
};

// The bias of row b's queries [i0, i0 + nq) on its global keys for head h: count[b] values, the
// same for every query of the group (the caller's query groups guarantee it), alive until the
// call of local_attention returns.
template <class Scalar>
using global_bias_fn = std::function<const Scalar*(index_t b, index_t i0, index_t nq, index_t h)>;

// ctx (B·L rows, ldo; head h at + h·d) = local attention of x. key_bias (B, L): 0 or −∞ per key,
// or nullptr. band: β on W(i) as a position_band covering every distance a query group meets
// (−∞ outside the window for a sliding window, T5's relative bias inside where there is one), or
// nullptr for none (disjoint blocks need no mask: the span is the block). g_bias: the bias on G,
// or empty. products: how the op multiplies (ops/attention.hpp; the dense encoders pass their
// compute precision's).
template <class Scalar, class Backend, class Window>
void local_attention(const local_qkv<Scalar>& x, index_t B, index_t L, index_t heads, index_t d, const Window& w, index_t query_block,
                     const Scalar* key_bias, const position_band<Scalar, Backend>* band, const global_segment<Scalar>& g,
                     const global_bias_fn<Scalar>& g_bias, Scalar* ctx, index_t ldo,
                     ops::attention_products products = ops::attention_products::exact) {
    query_block = std::max<index_t>(1, query_block);
    // Groups of one row are independent problems, solved in batches (bounding the problem list).
    std::vector<ops::attention_problem<Scalar>> problems;
    struct group {
        index_t b, i0, i1;
    };
    std::vector<group> pending;
    auto flush = [&] {
        if (pending.empty()) return;
        problems.clear();
        for (std::size_t n = 0; n < pending.size(); ++n) {
            const auto [b, i0, i1] = pending[n];
            const index_t k0 = std::max<index_t>(0, w.span_begin(i0)), k1 = std::min(L, w.span_end(i1));
            const index_t gc = g.empty() ? 0 : g.count[static_cast<std::size_t>(b)];
            for (index_t h = 0; h < heads; ++h) {
                ops::attention_problem<Scalar> p;
                p.q = x.q + (b * L + i0) * x.ldq + h * d;
                p.nq = i1 - i0;
                p.ldq = x.ldq;
                p.k = native_rows(x.k + (b * L + k0) * x.ldk + h * d, x.ldk);
                p.v = native_rows(x.v + (b * L + k0) * x.ldv + h * d, x.ldv);
                p.nk = k1 - k0;
                if (band) {
                    p.bias = band->at(h, k0 - i0);
                    p.ldb = -1;
                }
                if (key_bias) p.key_bias = key_bias + b * L + k0;
                if (gc > 0) {
                    p.k2 = native_rows(g.k + b * g.row_stride + h * d, g.ld);
                    p.v2 = native_rows(g.v + b * g.row_stride + h * d, g.ld);
                    p.nk2 = gc;
                    if (g_bias) {
                        p.bias2 = g_bias(b, i0, i1 - i0, h);
                        p.ldb2 = 0;
                    }
                }
                p.out = ctx + (b * L + i0) * ldo + h * d;
                p.ldo = ldo;
                p.products = products;
                problems.push_back(p);
            }
        }
        ops::attention<Backend>(problems, d);
        pending.clear();
    };
    const std::size_t batch = 4096;
    for (index_t b = 0; b < B; ++b)
        for (index_t i0 = 0; i0 < L;) {
            const index_t i1 = std::min(L, w.group_end(i0, query_block));
            pending.push_back({b, i0, i1});
            if (pending.size() >= batch) flush();
            i0 = i1;
        }
    flush();
}

}  // namespace locost::layers
