// A LOCOST encoder-decoder: the encoder of models/locost_encoder.hpp feeding the T5 decoder of
// models/t5_decoder.hpp. locost_model<Scalar, Backend> is the type-erased handle (the config
// chooses the compile-time structure once, in load_locost_model()).
//
//   encode()   runs the encoder over a batch and turns each document's states into its
//              cross-attention cache (keys/values of every decoder layer, padding left out),
//              freeing the encoder states as it goes: the states and the cache are never both
//              resident, which is what lets a 700K-token book fit.
//   start()    rows (beams) per document → a decoding state; step() feeds tokens and returns
//              logits; reorder() follows beam search.
//   score()    teacher forcing: logits of a batch of decoder inputs.
//
// Cross-attention cache precision (the memory that grows with the input: layers × 2 × L ×
// heads·d_kv values). automatic picks by the size the float32 cache would have for the batch:
// float32 up to 128 MiB (base model: ≤ 1820 tokens), bfloat16 up to 8 GiB (≤ 233K tokens), int8
// with a scale per (head, position) beyond (700K tokens: 12.8 GB + 0.8 GB of scales). Why: a
// decoding step is memory-bound — it reads the decoder's weights (base: 496 MB) and the whole
// cache — so once the cache is a sizeable share of those bytes, halving it makes every token
// faster (base, 4K tokens: the float32 cache is 302 MB, 38 % of a step's reads); below 128 MiB the
// gain is under 12 % and float32 keeps the original's numbers exactly. The accuracy each costs
// (bfloat16: ~4e-5 relative logit error, int8: ~6e-5; greedy ids unchanged) is measured in
// tests/test_decoder.cpp and bench/RESULTS.md.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "locost_encoder.hpp"
#include "t5_decoder.hpp"

namespace locost::models {

enum class cross_cache_precision { automatic, f32, bf16, i8 };

struct model_options {
    encoder_options encoder;
    cross_cache_precision cross_cache = cross_cache_precision::automatic;
    std::size_t automatic_f32_max_bytes = std::size_t{128} << 20;
    std::size_t automatic_bf16_max_bytes = std::size_t{8} << 30;
};

inline ops::kv_precision choose_cross_precision(const model_options& o, std::size_t f32_bytes) {
    switch (o.cross_cache) {
    case cross_cache_precision::f32: return ops::kv_precision::f32;
    case cross_cache_precision::bf16: return ops::kv_precision::bf16;
    case cross_cache_precision::i8: return ops::kv_precision::i8;
    case cross_cache_precision::automatic: break;
    }
    if (f32_bytes <= o.automatic_f32_max_bytes) return ops::kv_precision::f32;
    if (f32_bytes <= 2 * o.automatic_bf16_max_bytes) return ops::kv_precision::bf16;
    return ops::kv_precision::i8;
}

inline const char* precision_name(ops::kv_precision p) {
    switch (p) {
    case ops::kv_precision::native: return "native";
    case ops::kv_precision::f32: return "float32";
    case ops::kv_precision::bf16: return "bfloat16";
    case ops::kv_precision::i8: return "int8";
    }
    return "?";
}

// The encoded batch: one cross-attention cache per document.
struct encoded_batch {
    std::vector<cross_states> docs;
    ops::kv_precision precision = ops::kv_precision::f32;
    std::size_t bytes() const {
        std::size_t b = 0;
        for (const auto& d : docs) b += d.bytes();
        return b;
    }
};

template <class Scalar = float, class Backend = cpu>
class locost_model {
public:
    using state = decoder_state<Scalar, Backend>;

    struct iface {
        virtual ~iface() = default;
        virtual const io::model_config& config() const = 0;
        virtual encoded_batch encode(const std::int64_t* ids, const Scalar* mask, index_t B, index_t L,
                                     const progress_callback& progress) = 0;
        virtual state start(const std::vector<const cross_states*>& docs, const std::vector<index_t>& rows_per_doc,
                            index_t capacity) const = 0;
        virtual void step(state& s, const std::int64_t* tokens, index_t T, Scalar* logits) const = 0;
        virtual void reorder(state& s, const std::vector<index_t>& src) const = 0;
    };

    locost_model(std::unique_ptr<iface> impl, std::string source, std::optional<io::generation_config> gen)
        : impl_(std::move(impl)), source_(std::move(source)), generation_(std::move(gen)) {}

    const io::model_config& config() const { return impl_->config(); }
    // generation_config.json of the checkpoint, when it has one.
    const std::optional<io::generation_config>& generation_config() const { return generation_; }
    const std::string& source() const { return source_; }

    // ids (B, L); mask (B, L) of 0/1 or nullptr. Errors: encode.empty_input, ids.out_of_vocab,
    // encode.bad_mask, encode.empty_document (a row with no valid position).
    encoded_batch encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& progress = {}) {
        check_encoder_input(source_, config(), ids, mask, B, L);
        std::vector<Scalar> m;
        if (mask) {
            m.assign(mask, mask + B * L);
            for (index_t b = 0; b < B; ++b) {
                bool any = false;
                for (index_t l = 0; l < L; ++l) any = any || mask[b * L + l] != 0.0f;
                if (!any)
                    throw error("encode.empty_document", source_ + ": row " + std::to_string(b) +
                                                             " of the attention mask has no valid position");
            }
        }
        return impl_->encode(ids, m.empty() ? nullptr : m.data(), B, L, progress);
    }

    state start(const encoded_batch& e, index_t rows_per_doc, index_t capacity) const {
        std::vector<const cross_states*> docs;
        for (const auto& d : e.docs) docs.push_back(&d);
        return impl_->start(docs, std::vector<index_t>(e.docs.size(), rows_per_doc), capacity);
    }
    state start(const std::vector<const cross_states*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const {
        return impl_->start(docs, rows_per_doc, capacity);
    }
    // tokens (rows, T) → logits (rows, T, vocab). Errors: ids.out_of_vocab, decode.capacity.
    void step(state& s, const std::int64_t* tokens, index_t T, Scalar* logits) const {
        const index_t V = config().vocab_size;
        for (index_t i = 0; i < s.rows * T; ++i)
            if (tokens[i] < 0 || tokens[i] >= V)
                throw error("ids.out_of_vocab", source_ + ": decoder token id " + std::to_string(tokens[i]) + " is not in [0, " +
                                                    std::to_string(V) + ")");
        impl_->step(s, tokens, T, logits);
    }
    void reorder(state& s, const std::vector<index_t>& src) const { impl_->reorder(s, src); }

    // Teacher forcing: encoder ids (B, L) with mask, decoder ids (B, T) → logits (B, T, vocab).
    tensor<Scalar, Backend> score(const std::int64_t* ids, const float* mask, index_t B, index_t L, const std::int64_t* decoder_ids,
                                  index_t T, const progress_callback& progress = {}) {
        if (T <= 0) throw error("score.empty_input", source_ + ": no decoder tokens to score");
        encoded_batch e = encode(ids, mask, B, L, progress);
        state s = start(e, 1, T);
        tensor<Scalar, Backend> logits({B, T, config().vocab_size});
        step(s, decoder_ids, T, logits.data());
        return logits;
    }

private:
    std::unique_ptr<iface> impl_;
    std::string source_;
    std::optional<io::generation_config> generation_;
};

namespace detail {

template <class Traits>
class seq2seq_model final : public locost_model<typename Traits::scalar, typename Traits::backend>::iface {
public:
    using Scalar = typename Traits::scalar;
    using Backend = typename Traits::backend;
    using state = decoder_state<Scalar, Backend>;

    seq2seq_model(const io::checkpoint& ck, const model_options& o) : opt_(o), encoder_(ck, o.encoder), decoder_(ck) {}

    const io::model_config& config() const override { return encoder_.config(); }

    encoded_batch encode(const std::int64_t* ids, const Scalar* mask, index_t B, index_t L, const progress_callback& progress) override {
        const auto& c = config();
        const index_t H = c.d_model, I = c.num_heads * c.d_kv, layers = c.num_decoder_layers;
        tensor<Scalar, Backend> x = encoder_.forward(ids, mask, B, L, progress, {});
        encoded_batch out;
        index_t valid_total = 0;
        std::vector<index_t> valid(static_cast<std::size_t>(B), L);
        if (mask)
            for (index_t b = 0; b < B; ++b) {
                valid[static_cast<std::size_t>(b)] = 0;
                for (index_t l = 0; l < L; ++l) valid[static_cast<std::size_t>(b)] += mask[b * L + l] != Scalar(0);
            }
        for (index_t v : valid) valid_total += v;
        const std::size_t f32_bytes = static_cast<std::size_t>(valid_total * layers * 2 * I) * 4;
        out.precision = choose_cross_precision(opt_, f32_bytes);
        const index_t tile = std::max<index_t>(1, opt_.encoder.tile_rows);
        tensor<Scalar, Backend> rows({tile, H});
        index_t done = 0;
        for (index_t b = 0; b < B; ++b) {
            out.docs.push_back(decoder_.make_document(valid[static_cast<std::size_t>(b)], out.precision));
            auto& doc = out.docs.back();
            const Scalar* xb = x.data() + b * L * H;
            index_t j = 0, l = 0;
            while (l < L) {
                index_t n = 0;
                for (; l < L && n < tile; ++l)
                    if (!mask || mask[b * L + l] != Scalar(0)) std::memcpy(rows.data() + (n++) * H, xb + l * H, static_cast<std::size_t>(H) * sizeof(Scalar));
                if (n) decoder_.fill_document(doc, rows.data(), j, n);
                j += n;
                done += n;
                release_pages(x.data(), static_cast<std::size_t>(b * L + l) * static_cast<std::size_t>(H) * sizeof(Scalar));
                if (progress) progress({c.num_layers, c.num_layers, done, valid_total, true});
            }
        }
        return out;
    }

    state start(const std::vector<const cross_states*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const override {
        return decoder_.start(docs, rows_per_doc, capacity);
    }
    void step(state& s, const std::int64_t* tokens, index_t T, Scalar* logits) const override { decoder_.step(s, tokens, T, logits); }
    void reorder(state& s, const std::vector<index_t>& src) const override { decoder_.reorder(s, src); }

private:
    model_options opt_;
    locost_encoder_stack<Traits> encoder_;
    t5_decoder<Scalar, Backend, Traits::act, Traits::gated_ff> decoder_;
};

} // namespace detail

// Loads a LOCOST encoder-decoder checkpoint. Errors: those of check_locost_checkpoint().
template <class Backend = cpu, class Scalar = float>
locost_model<Scalar, Backend> load_locost_model(const io::checkpoint& ck, const model_options& o = {}) {
    check_locost_checkpoint(ck);
    auto impl = dispatch_locost<Scalar, Backend>(ck.config(), ck.dir() + "/config.json",
                                                 [&]<class Traits>() -> std::unique_ptr<typename locost_model<Scalar, Backend>::iface> {
                                                     return std::make_unique<detail::seq2seq_model<Traits>>(ck, o);
                                                 });
    return locost_model<Scalar, Backend>(std::move(impl), ck.dir(), ck.generation());
}

} // namespace locost::models
