// Batched greedy decoding (generation/decoding_rows.hpp) over every Hugging Face reference case
// (tests/models/hf_reference.hpp; it compiles with tests/models): documents that finish leave the
// batch, and every document's ids equal those of its own run.
#include "models/hf_reference.hpp"

namespace {

// A model that forwards to another and records how many rows each decoding step ran.
template <class Model>
struct rows_per_step {
    using scalar = typename Model::scalar;
    using encoded = typename Model::encoded;
    using state = typename Model::state;
    const Model& m;
    mutable std::vector<index_t> rows;
    const locost::models::model_config& config() const { return m.config(); }
    state start(const encoded& e, index_t per, index_t capacity) const { return m.start(e, per, capacity); }
    void step(state& s, const std::int64_t* tokens, index_t T, scalar* logits) const {
        rows.push_back(s.rows);
        m.step(s, tokens, T, logits);
    }
    void reorder(state& s, const std::vector<index_t>& src) const { m.reorder(s, src); }
    void retain(state& s, const std::vector<index_t>& keep) const { m.retain(s, keep); }
};

std::string show(const locost::generation::token_rows& rows) { return nlohmann::json(rows).dump(); }

std::vector<std::int64_t> without_trailing(std::vector<std::int64_t> r, std::int64_t pad) {
    while (r.size() > 1 && r.back() == pad) r.pop_back();
    return r;
}

}  // namespace

TEST_CASE("generation: a greedy batch drops the documents it has finished, and every document's ids equal its own run") {
    int drops = 0;
    for (const auto& c : hf_cases) {
        CAPTURE(std::string(c.name));
        const auto ck = locost::io::checkpoint::open(hf_dir + "/" + c.checkpoint);
        const reference ref(hf_dir + "/" + c.name + "/reference.safetensors");
        const batch in = encoder_batch(ref);
        REQUIRE(in.B >= 2);
        auto m = models::load_model<float, cpu>(ck, options_of(c));
        const auto enc_rows = unpadded_rows(in);
        // Each document encoded alone, decoded together (what --max-batch-tokens runs).
        const auto e = models::encode_each(m, enc_rows);
        auto o = m.default_generation_options();
        const index_t V = m.config().vocab_size;
        o.max_new_tokens = 12;
        // As transformers' greedy_nr_eos case: plain greedy decoding of these tiny random models
        // repeats one token; the processors (run over the rows left in the batch) vary it.
        o.repetition_penalty = 1.5;
        o.no_repeat_ngram_size = 2;
        o.min_length = 0;
        o.forced_eos_token_id.clear();
        o.eos_token_id = {V - 1};
        const auto first = locost::generation::generate(m, e, enc_rows, o);
        // The eos becomes a token that some document decodes first at step f while another has
        // not decoded it by then (the earliest such step): that document ends at f, another later.
        auto first_at = [](const std::vector<std::int64_t>& r, std::int64_t t) {
            const auto it = std::find(r.begin() + 1, r.end(), t);
            return it == r.end() ? std::size_t{13} : static_cast<std::size_t>(it - r.begin());
        };
        std::size_t f = 1;
        std::int64_t eos = first.sequences[0][1];
        for (std::size_t i = 1, found = 0; i < first.sequences[0].size() && !found; ++i)
            for (const auto& r : first.sequences) {
                bool later = false;
                for (const auto& other : first.sequences) later = later || first_at(other, r[i]) > i;
                if (first_at(r, r[i]) == i && later) {
                    f = i, eos = r[i], found = 1;
                    break;
                }
            }
        const std::string first_ids = show(first.sequences);
        CAPTURE(first_ids);
        o.eos_token_id = {static_cast<index_t>(eos)};
        std::size_t last_end = 0;  // the step where the last document ends (12: it does not)
        for (const auto& r : first.sequences) last_end = std::max(last_end, std::min<std::size_t>(12, first_at(r, eos)));
        rows_per_step<decltype(m)> counted{m, {}};
        const auto batched = locost::generation::generate(counted, e, enc_rows, o);
        REQUIRE(counted.rows.size() == last_end);
        CHECK(counted.rows[0] == in.B);
        CHECK(counted.rows[f - 1] == in.B);  // the step that ends a document still runs it
        if (last_end > f) {
            CHECK(counted.rows[f] < in.B);  // it is gone from the next
            ++drops;
        }
        for (std::size_t i = 1; i < counted.rows.size(); ++i) CHECK(counted.rows[i] <= counted.rows[i - 1]);
        // The padded batch encoded at once gives the same ids too, except through SLED, whose
        // chunks are laid over the padded length (as the original SLED code does).
        if (c.prefix < 0) {
            const auto padded = m.encode(in.ids.data(), in.mask.data(), in.B, in.L);
            CHECK(locost::generation::generate(m, padded, enc_rows, o).sequences == batched.sequences);
        }
        // Each document alone: the same ids.
        for (index_t b = 0; b < in.B; ++b) {
            CAPTURE(b);
            const auto& row = enc_rows[static_cast<std::size_t>(b)];
            const auto one = m.encode(row.data(), nullptr, 1, static_cast<index_t>(row.size()));
            const auto alone = locost::generation::generate(m, one, {row}, o);
            const std::string batched_ids = show(batched.sequences), alone_ids = show(alone.sequences);
            CAPTURE(batched_ids);
            CAPTURE(alone_ids);
            CHECK(without_trailing(batched.sequences[static_cast<std::size_t>(b)], o.pad_token()) ==
                  without_trailing(alone.sequences[0], o.pad_token()));
        }
    }
    CHECK(drops >= 6);  // most cases exercise a drop
}
