// What generation/, the tool and the generic glue may rely on, as concepts.
//
//   encoder<E>         token ids (B, L) + 0/1 mask → states, streamed to a sink position range by
//                      position range (so SLED can hand over each chunk's kept states and free
//                      them). output_span() says which input positions the states stand for.
//   dense_encoder<E>   an encoder that can also return its whole output (B, L, d_model) at once:
//                      what SLED slides over its chunks. One whose forward() keeps its layers'
//                      scratch for the next call also has release_scratch(), which SLED calls
//                      after its last chunk (any_encoder calls it where it exists).
//   decoder<D>         a per-document cross-attention cache (`document`) filled from encoder
//                      states, and decoding rows (`state`) that start/step/reorder over it.
//   seq2seq_model<M>   what generation drives (generation/search.hpp), and all that it uses:
//                      config() for the vocabulary size, start/step/reorder over an encoded
//                      batch (M::encoded), logits in M::scalar read as float32.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "../core/tensor.hpp"
#include "../ops/attention.hpp"
#include "config.hpp"
#include "options.hpp"

namespace locost::models {

// Receives states of output positions [pos, pos + n) of batch row `row`: h (n, d_model), rows
// contiguous. Each position of each row arrives exactly once, in increasing order per row.
template <class Scalar>
using state_sink = std::function<void(index_t row, index_t pos, index_t n, const Scalar* h)>;

// Output position o of a row stands for input position offset + o; there are `length` of them.
// (SLED without encode_prefix drops the prefix: offset = prefix length.)
struct output_positions {
    index_t offset = 0, length = 0;
};

template <class E>
concept encoder = requires(E& e, const E& ce, const std::int64_t* ids, const float* mask, index_t n, const progress_callback& p,
                           const state_sink<typename E::scalar>& sink) {
    typename E::scalar;
    typename E::backend;
    { ce.d_model() } -> std::convertible_to<index_t>;
    { ce.vocab_size() } -> std::convertible_to<index_t>;
    { ce.output_span(n) } -> std::same_as<output_positions>;
    // The longest input the encoder accepts in one piece (none: any length).
    { ce.max_context() } -> std::same_as<std::optional<index_t>>;
    e.encode(ids, mask, n, n, p, sink);
};

template <class E>
concept dense_encoder = encoder<E> && requires(E& e, const std::int64_t* ids, const float* mask, index_t n, const progress_callback& p) {
    { e.forward(ids, mask, n, n, p) } -> std::same_as<tensor<typename E::scalar, typename E::backend>>;
};

template <class D>
concept decoder = requires(const D& d, typename D::document& doc, const typename D::scalar* h, index_t n, ops::kv_precision prec,
                           typename D::state& s, const std::int64_t* tokens, typename D::scalar* logits,
                           const std::vector<const typename D::document*>& docs, const std::vector<index_t>& rows) {
    typename D::scalar;
    typename D::backend;
    typename D::document;
    typename D::state;
    { d.d_model() } -> std::convertible_to<index_t>;
    { d.vocab_size() } -> std::convertible_to<index_t>;
    // Bytes one encoder position takes in a float32 cross-attention cache (all layers).
    { d.cross_bytes_per_position() } -> std::convertible_to<std::size_t>;
    { d.make_document(n, prec) } -> std::same_as<typename D::document>;
    d.fill_document(doc, h, n, n);
    { d.start(docs, rows, n) } -> std::same_as<typename D::state>;
    d.step(s, tokens, n, logits);
    d.reorder(s, rows);
};

template <class M>
concept seq2seq_model = requires(const M& m, const typename M::encoded& e, typename M::state& s, const std::int64_t* tokens,
                                 typename M::scalar* logits, index_t n, const std::vector<index_t>& src) {
    typename M::scalar;
    typename M::encoded;
    typename M::state;
    // generation keeps a step's logits in a std::vector<scalar> and reads them as float32 scores
    requires std::default_initializable<typename M::scalar> && std::convertible_to<const typename M::scalar&, float>;
    { m.config() } -> std::convertible_to<const model_config&>;
    { e.docs.size() } -> std::convertible_to<std::size_t>;
    { m.start(e, n, n) } -> std::same_as<typename M::state>;
    m.step(s, tokens, n, logits);
    m.reorder(s, src);
};

}  // namespace locost::models
