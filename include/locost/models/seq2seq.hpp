// The encoder-decoder glue, written once for every family: seq2seq<Encoder, Decoder>.
//
//   encode()   runs the encoder over a batch and streams each document's states into its
//              cross-attention cache (keys/values of every decoder layer, padding left out) as
//              the encoder hands them over: a plain encoder hands over tiles of its output and
//              frees them, SLED hands over each chunk's kept states. On the host, encoder states
//              and the cache are never both resident, which is what lets a 700K-token book fit
//              in RAM; a device frees the states whole once the cache is filled.
//   start()    rows (beams) per document → a decoding state; step() feeds tokens and returns
//              logits; reorder() follows beam search; retain() drops finished documents;
//              join() adds documents to rows already decoding.
//   score()    teacher forcing: logits of a batch of decoder inputs.
//   encode_each()  documents encoded one at a time, decoded together (batches of short documents).
//
// any_encoder<Scalar, Backend> (here) and any_model<Scalar, Backend> (models/any_model.hpp) are
// the type-erased handles the registry returns (models/registry.hpp): the config chooses the
// compile-time structure once, and nothing here knows a family.
#pragma once
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../config/error.hpp"
#include "../io/config.hpp"
#include "../layers/parameter.hpp"
#include "concepts.hpp"
#include "../generation/options.hpp"
#include "../text/conventions.hpp"
#include "decoder_state.hpp"
#include "any_model.hpp"
#include "encoder_stack.hpp"

namespace locost::models {

// Every row of a 0/1 mask (B, L) must have a valid position. Error: encode.empty_document.
inline void check_rows_nonempty(const std::string& source, const float* mask, index_t B, index_t L) {
    if (!mask) return;
    for (index_t b = 0; b < B; ++b) {
        bool any = false;
        for (index_t l = 0; l < L; ++l) any = any || mask[b * L + l] != 0.0f;
        if (!any)
            throw error("encode.empty_document", source + ": row " + std::to_string(b) + " of the attention mask has no valid position");
    }
}

// The type-erased encoder handle: any dense encoder (a family's stack, or SLED over one).
template <class Scalar, class Backend>  // = float, cpu (models/any_model.hpp)
class any_encoder {
public:
    using scalar = Scalar;
    using backend = Backend;

    struct iface {
        virtual ~iface() = default;
        virtual index_t d_model() const = 0;
        virtual index_t vocab_size() const = 0;
        virtual output_positions span(index_t L) const = 0;
        virtual std::optional<index_t> max_context() const = 0;
        virtual tensor<Scalar, Backend> forward(const std::int64_t*, const float*, index_t, index_t, const progress_callback&,
                                                const block_observer<Scalar>&) = 0;
        virtual void encode(const std::int64_t*, const float*, index_t, index_t, const progress_callback&, const state_sink<Scalar>&) = 0;
        virtual void release_scratch() = 0;
        virtual void drop_caches() = 0;
        virtual void set_prefix_length(index_t) = 0;
    };
    template <dense_encoder E>
    struct impl final : iface {
        E e;
        explicit impl(E x) : e(std::move(x)) {}
        index_t d_model() const override { return e.d_model(); }
        index_t vocab_size() const override { return e.vocab_size(); }
        output_positions span(index_t L) const override { return e.output_span(L); }
        std::optional<index_t> max_context() const override { return e.max_context(); }
        tensor<Scalar, Backend> forward(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p,
                                        const block_observer<Scalar>& observe) override {
            if constexpr (requires { e.forward(ids, mask, B, L, p, observe); }) return e.forward(ids, mask, B, L, p, observe);
            else return e.forward(ids, mask, B, L, p);
        }
        void encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p,
                    const state_sink<Scalar>& sink) override {
            e.encode(ids, mask, B, L, p, sink);
        }
        // Encoders whose forward() keeps its layers' scratch for the next call say how to give it
        // back; the others keep none.
        void release_scratch() override {
            if constexpr (requires { e.release_scratch(); }) e.release_scratch();
        }
        void drop_caches() override {
            if constexpr (requires { e.drop_caches(); }) e.drop_caches();
        }
        // SLED reads the prefix length; a plain encoder has no prefix to know of (a prefix is
        // just the first ids of the row), so 0 is all it accepts.
        void set_prefix_length(index_t n) override {
            if constexpr (requires { e.set_prefix_length(n); }) e.set_prefix_length(n);
            else if (n != 0)
                throw error("sled.bad_prefix",
                            "a prefix length of " + std::to_string(n) + " applies to SLED, and this encoder is not run through SLED");
        }
    };

    any_encoder() = default;
    template <dense_encoder E>
    any_encoder(E e, std::shared_ptr<const model_config> cfg) : impl_(std::make_shared<impl<E>>(std::move(e))), config_(std::move(cfg)) {}

    index_t d_model() const { return impl_->d_model(); }
    index_t vocab_size() const { return impl_->vocab_size(); }
    output_positions output_span(index_t L) const { return impl_->span(L); }
    std::optional<index_t> max_context() const { return impl_->max_context(); }
    const model_config& config() const { return *config_; }
    std::shared_ptr<const model_config> config_ptr() const { return config_; }

    // ids (B, L), mask (B, L) of 0/1 or nullptr → (B, output_span(L).length, d_model). `observe`
    // sees the hidden states inside every block (a family's stack; SLED's chunks are not observed).
    // Errors: encode.empty_input, ids.out_of_vocab, encode.bad_mask, encode.empty_document.
    tensor<Scalar, Backend> forward(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p = {},
                                    const block_observer<Scalar>& observe = {}) {
        check(ids, mask, B, L);
        return impl_->forward(ids, mask, B, L, p, observe);
    }
    void encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p,
                const state_sink<Scalar>& sink) {
        check(ids, mask, B, L);
        impl_->encode(ids, mask, B, L, p, sink);
    }
    // After a series of forward() calls (SLED's chunks): the scratch they kept goes back.
    void release_scratch() { impl_->release_scratch(); }
    // Drops what the encoder keeps between calls to go faster (LOCOST's S4D kernels): the next
    // call starts cold.
    void drop_caches() { impl_->drop_caches(); }
    // SLED: the length of the prefix the next inputs start with (sled::set_prefix_length).
    // Error: sled.bad_prefix, sled.context_too_long.
    void set_prefix_length(index_t n) { impl_->set_prefix_length(n); }
    // One document: ids (L) → (1, L, d_model).
    tensor<Scalar, Backend> encode(const std::vector<int>& ids, const progress_callback& p = {}) {
        const std::vector<std::int64_t> v(ids.begin(), ids.end());
        return forward(v.data(), nullptr, 1, static_cast<index_t>(v.size()), p);
    }

private:
    void check(const std::int64_t* ids, const float* mask, index_t B, index_t L) const {
        check_encoder_input(config_->source, vocab_size(), ids, mask, B, L);
        check_rows_nonempty(config_->source, mask, B, L);
    }
    std::shared_ptr<iface> impl_;
    std::shared_ptr<const model_config> config_;
};

// encoded_batch: models/cross_states.hpp.

template <encoder Encoder, decoder Decoder>
class seq2seq {
public:
    using scalar = typename Decoder::scalar;
    using backend = typename Decoder::backend;
    using document = typename Decoder::document;
    using encoded = encoded_batch<document>;
    using state = typename Decoder::state;
    static_assert(std::is_same_v<typename Encoder::scalar, scalar>, "seq2seq: encoder and decoder must compute in one scalar type");

    seq2seq(Encoder e, Decoder d, std::shared_ptr<const model_config> cfg, const model_options& o)
        : encoder_(std::move(e)), decoder_(std::move(d)), config_(std::move(cfg)), opt_(o) {
        if (encoder_.d_model() != decoder_.d_model())
            throw error("model.unsupported",
                        config_->source + ": the encoder's states have " + std::to_string(encoder_.d_model()) +
                            " features, the decoder reads " + std::to_string(decoder_.d_model()));
    }

    const model_config& config() const { return *config_; }
    Encoder& encoder() { return encoder_; }
    const Decoder& decoder() const { return decoder_; }

    // The encoder's output itself, (B, output_span(L).length, d_model), not the cache built from it.
    tensor<scalar, backend> encoder_states(const std::int64_t* ids, const float* mask, index_t B, index_t L,
                                           const progress_callback& progress = {}) {
        return encoder_.forward(ids, mask, B, L, progress);
    }
    void set_prefix_length(index_t n) { encoder_.set_prefix_length(n); }

    // ids (B, L); mask (B, L) of 0/1 or nullptr. Errors: encode.empty_input, ids.out_of_vocab,
    // encode.bad_mask, encode.empty_document (a row with no valid position).
    encoded encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& progress = {}) {
        check_encoder_input(config_->source, config_->vocab_size, ids, mask, B, L);
        check_rows_nonempty(config_->source, mask, B, L);
        const output_positions span = encoder_.output_span(L);
        std::vector<index_t> valid(static_cast<std::size_t>(B), span.length);
        if (mask)
            for (index_t b = 0; b < B; ++b) {
                index_t v = 0;
                for (index_t o = 0; o < span.length; ++o) v += mask[b * L + span.offset + o] != 0.0f;
                valid[static_cast<std::size_t>(b)] = v;
            }
        index_t valid_total = 0;
        for (index_t v : valid) valid_total += v;
        encoded out;
        out.precision = choose_cross_precision(opt_, static_cast<std::size_t>(valid_total) * decoder_.cross_bytes_per_position());
        // The caches are allocated when the first states arrive, not before the encoder runs: a
        // device commits an allocation whole (the host only the pages written), so allocating
        // them first would hold the whole cache beside the encoder's working set. A plain
        // encoder hands over its states after its last layer, SLED after its first chunk.
        auto make_documents = [&] {
            if (!out.docs.empty()) return;
            for (index_t b = 0; b < B; ++b) out.docs.push_back(decoder_.make_document(valid[static_cast<std::size_t>(b)], out.precision));
        };

        // Valid positions go to the cache in runs (no copy); masked ones are left out, which is
        // the same as masking them: cross-attention has no position bias.
        std::vector<index_t> cursor(static_cast<std::size_t>(B), 0);
        const index_t H = decoder_.d_model(), layers = config_->num_layers;
        index_t done = 0;
        bool chunked = false;
        const progress_callback on_encoder = [&](const encode_progress& e) {
            chunked = chunked || e.chunks > 0;
            if (progress) progress(e);
        };
        encoder_.encode(ids, mask, B, L, on_encoder, [&](index_t b, index_t pos, index_t n, const scalar* h) {
            make_documents();
            auto& doc = out.docs[static_cast<std::size_t>(b)];
            index_t& j = cursor[static_cast<std::size_t>(b)];
            const float* m = mask ? mask + b * L + span.offset + pos : nullptr;
            for (index_t r = 0; r < n;) {
                if (m && m[r] == 0.0f) {
                    ++r;
                    continue;
                }
                index_t e = r + 1;
                while (e < n && (!m || m[e] != 0.0f)) ++e;
                decoder_.fill_document(doc, h + r * H, j, e - r);
                j += e - r;
                done += e - r;
                r = e;
            }
            if (progress && !chunked) progress({layers, layers, done, valid_total, true});
        });
        make_documents();
        for (index_t b = 0; b < B; ++b) LOCOST_ASSERT(cursor[static_cast<std::size_t>(b)] == valid[static_cast<std::size_t>(b)]);
        return out;
    }

    state start(const encoded& e, index_t rows_per_doc, index_t capacity) const {
        std::vector<const document*> docs;
        for (const auto& d : e.docs) docs.push_back(&d);
        return decoder_.start(docs, std::vector<index_t>(e.docs.size(), rows_per_doc), capacity);
    }
    state start(const std::vector<const document*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const {
        return decoder_.start(docs, rows_per_doc, capacity);
    }
    // tokens (rows, T) → logits (rows, T, vocab), both in host memory on every backend (a device
    // copies the tokens in and the logits out). Errors: ids.out_of_vocab, decode.capacity.
    void step(state& s, const std::int64_t* tokens, index_t T, scalar* logits) const {
        const index_t V = config_->vocab_size;
        for (index_t i = 0; i < s.rows * T; ++i)
            if (tokens[i] < 0 || tokens[i] >= V)
                throw error("ids.out_of_vocab",
                            config_->source + ": decoder token id " + std::to_string(tokens[i]) + " is not in [0, " + std::to_string(V) +
                                ")");
        decoder_.step(s, tokens, T, logits);
    }
    void reorder(state& s, const std::vector<index_t>& src) const { decoder_.reorder(s, src); }
    // Only the documents at positions `keep` of the state decode on (generation drops the
    // documents a batch has finished).
    void retain(state& s, const std::vector<index_t>& keep) const { decoder_.retain(s, keep); }
    // Documents join the rows decoding in `s` between two steps, each row from its own position 0
    // (continuous batching: generation/running_batch.hpp).
    void join(state& s, const std::vector<const document*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const {
        decoder_.join(s, docs, rows_per_doc, capacity);
    }

    // Teacher forcing: encoder ids (B, L) with mask, decoder ids (B, T) → logits (B, T, vocab), on
    // the host.
    tensor<scalar> score(const std::int64_t* ids, const float* mask, index_t B, index_t L, const std::int64_t* decoder_ids, index_t T,
                         const progress_callback& progress = {}) {
        if (T <= 0) throw error("score.empty_input", config_->source + ": no decoder tokens to score");
        encoded e = encode(ids, mask, B, L, progress);
        state s = start(e, 1, T);
        tensor<scalar> logits({B, T, config_->vocab_size});
        step(s, decoder_ids, T, logits.data());
        return logits;
    }

private:
    Encoder encoder_;
    Decoder decoder_;
    std::shared_ptr<const model_config> config_;
    model_options opt_;
};

// Documents encoded one at a time and put side by side in one encoded batch, to decode together.
// Each document's states and cache are those of its own run: no padding (which would change
// SLED's chunks, and costs encoder work), and the cache precision chosen for its own size. The
// decoder keeps a cache per document anyway, so a batch of short documents decodes at batch
// speed while its encoder does the same work as one by one (generation::length_batches).
template <class Model>
typename Model::encoded encode_each(Model& m, const std::vector<std::vector<std::int64_t>>& rows, const progress_callback& progress = {}) {
    typename Model::encoded out;
    for (const auto& r : rows) {
        auto e = m.encode(r.data(), nullptr, 1, static_cast<index_t>(r.size()), progress);
        out.precision = e.precision;  // the last document's: each document carries its own
        for (auto& d : e.docs) out.docs.push_back(std::move(d));
    }
    return out;
}

// family_traits, any_model: models/any_model.hpp.

}  // namespace locost::models
