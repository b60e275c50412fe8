// The type-erased model handle (any_model) and what a family tells the code that drives it
// (family_traits). On their own, over declarations of the decoding state and tensors, so that
// the public API's light headers (locost/api.hpp) can hold a loaded model and call it: every
// member is a virtual call into the family's seq2seq (models/seq2seq.hpp), instantiated where
// the model is loaded (models/registry.hpp, or the compiled library).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../core/index.hpp"
#include "../generation/options.hpp"
#include "../io/generation_config.hpp"
#include "../text/conventions.hpp"
#include "cross_states.hpp"
#include "model_config.hpp"
#include "options.hpp"

namespace locost::models {

template <class Scalar, class Backend>
struct decoder_state;  // models/decoder_state.hpp
template <class Scalar = float, class Backend = cpu>
class any_encoder;  // models/seq2seq.hpp

// What a model's family tells the code that drives it, as values (models/family.hpp).
struct family_traits {
    const char* name = "";
    // Beam search as the family's users run it (generation::beam_convention).
    generation::beam_convention beam_convention = generation::beam_convention::hf_5;
    text::tokenizer_conventions tokenizer;
    // The encoder attends from every token to every other (time O(L²) in the input's length): a
    // book takes it hours, where SLED over it or a long-input family takes minutes.
    bool all_to_all_encoder = false;
};

// The type-erased model handle the registry returns: any encoder (a family's, or SLED over one)
// with any family's decoder (every decoder_stack keeps its cross-attention cache and rows in
// cross_states / decoder_state, models/decoder_state.hpp).
template <class Scalar = float, class Backend = cpu>
class any_model {
public:
    using scalar = Scalar;
    using backend = Backend;
    using document = cross_states;
    using encoded = encoded_batch<document>;
    using state = decoder_state<Scalar, Backend>;

    struct iface {
        virtual ~iface() = default;
        virtual encoded encode(const std::int64_t*, const float*, index_t, index_t, const progress_callback&) = 0;
        virtual state start(const std::vector<const document*>&, const std::vector<index_t>&, index_t) const = 0;
        virtual void step(state&, const std::int64_t*, index_t, Scalar*) const = 0;
        virtual void reorder(state&, const std::vector<index_t>&) const = 0;
        virtual void retain(state&, const std::vector<index_t>&) const = 0;
        virtual void join(state&, const std::vector<const document*>&, const std::vector<index_t>&, index_t) const = 0;
        virtual tensor<Scalar> score(const std::int64_t*, const float*, index_t, index_t, const std::int64_t*, index_t,
                                     const progress_callback&) = 0;
        virtual tensor<Scalar, Backend> encoder_states(const std::int64_t*, const float*, index_t, index_t, const progress_callback&) = 0;
        virtual void set_prefix_length(index_t) = 0;
    };
    template <class M>
    struct impl final : iface {
        M m;
        explicit impl(M x) : m(std::move(x)) {}
        encoded encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p) override {
            return m.encode(ids, mask, B, L, p);
        }
        state start(const std::vector<const document*>& d, const std::vector<index_t>& r, index_t c) const override {
            return m.start(d, r, c);
        }
        void step(state& s, const std::int64_t* t, index_t T, Scalar* l) const override { m.step(s, t, T, l); }
        void reorder(state& s, const std::vector<index_t>& src) const override { m.reorder(s, src); }
        void retain(state& s, const std::vector<index_t>& keep) const override { m.retain(s, keep); }
        void join(state& s, const std::vector<const document*>& d, const std::vector<index_t>& r, index_t c) const override {
            m.join(s, d, r, c);
        }
        tensor<Scalar> score(const std::int64_t* ids, const float* mask, index_t B, index_t L, const std::int64_t* d, index_t T,
                             const progress_callback& p) override {
            return m.score(ids, mask, B, L, d, T, p);
        }
        tensor<Scalar, Backend> encoder_states(const std::int64_t* ids, const float* mask, index_t B, index_t L,
                                               const progress_callback& p) override {
            return m.encoder_states(ids, mask, B, L, p);
        }
        void set_prefix_length(index_t n) override { m.set_prefix_length(n); }
    };

    template <class M>
    any_model(M m, std::shared_ptr<const model_config> cfg, family_traits family, std::optional<io::generation_config> gen,
              std::string source)
        : impl_(std::make_unique<impl<M>>(std::move(m))), config_(std::move(cfg)), family_(family), generation_(std::move(gen)),
          source_(std::move(source)) {}

    const model_config& config() const { return *config_; }
    // The conventions of the model's family (beam search, tokenizer numbering).
    const family_traits& family() const { return family_; }
    // The generation settings the checkpoint implies: Hugging Face's defaults, its generation
    // config, its family's conventions (generation::default_generation_options for the first two).
    generation::generation_options default_generation_options() const {
        auto o = generation::default_generation_options(*config_, generation_);
        o.beam_convention = family_.beam_convention;
        return o;
    }
    std::shared_ptr<const model_config> config_ptr() const { return config_; }
    // generation_config.json of the checkpoint, when it has one.
    const std::optional<io::generation_config>& generation_config() const { return generation_; }
    const std::string& source() const { return source_; }

    encoded encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p = {}) {
        return impl_->encode(ids, mask, B, L, p);
    }
    state start(const encoded& e, index_t rows_per_doc, index_t capacity) const {
        std::vector<const document*> docs;
        for (const auto& d : e.docs) docs.push_back(&d);
        return impl_->start(docs, std::vector<index_t>(e.docs.size(), rows_per_doc), capacity);
    }
    state start(const std::vector<const document*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const {
        return impl_->start(docs, rows_per_doc, capacity);
    }
    void step(state& s, const std::int64_t* tokens, index_t T, Scalar* logits) const { impl_->step(s, tokens, T, logits); }
    void reorder(state& s, const std::vector<index_t>& src) const { impl_->reorder(s, src); }
    void retain(state& s, const std::vector<index_t>& keep) const { impl_->retain(s, keep); }
    // Documents join the rows decoding in `s` (continuous batching; models/decoder_stack.hpp).
    void join(state& s, const std::vector<const document*>& docs, const std::vector<index_t>& rows_per_doc, index_t capacity) const {
        impl_->join(s, docs, rows_per_doc, capacity);
    }
    tensor<Scalar> score(const std::int64_t* ids, const float* mask, index_t B, index_t L, const std::int64_t* decoder_ids, index_t T,
                         const progress_callback& p = {}) {
        return impl_->score(ids, mask, B, L, decoder_ids, T, p);
    }
    // The encoder's states (B, output_span(L).length, d_model), without building a cache: what
    // `locost encode` writes and Python's Model.encode returns. Errors: those of encode().
    tensor<Scalar, Backend> encoder_states(const std::int64_t* ids, const float* mask, index_t B, index_t L,
                                           const progress_callback& p = {}) {
        return impl_->encoder_states(ids, mask, B, L, p);
    }
    // SLED: the length of the prefix every row of the next inputs starts with (a question put
    // before every chunk); 0 for no prefix. A plain encoder accepts only 0. Errors: sled.bad_prefix,
    // sled.context_too_long.
    void set_prefix_length(index_t n) { impl_->set_prefix_length(n); }

private:
    std::unique_ptr<iface> impl_;
    std::shared_ptr<const model_config> config_;
    family_traits family_;
    std::optional<io::generation_config> generation_;
    std::string source_;
};

}  // namespace locost::models
