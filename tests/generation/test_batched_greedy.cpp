// Batched greedy decoding (generation/decoding_rows.hpp) and continuous batching
// (generation/running_batch.hpp) over every Hugging Face reference case
// (tests/models/hf_reference.hpp; it compiles with tests/models): documents that finish leave the
// batch, and every document's ids equal those of its own run.
#include "models/hf_reference.hpp"

#include <map>

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

using model_t = models::any_model<float, cpu>;

// Reference case c's model and its encoder rows, unpadded.
struct loaded_case {
    batch in;
    model_t m;
    locost::generation::token_rows rows;
};

loaded_case load_case(const hf_case& c) {
    const auto ck = locost::io::checkpoint::open(hf_dir + "/" + c.checkpoint);
    const reference ref(hf_dir + "/" + c.name + "/reference.safetensors");
    batch in = encoder_batch(ref);
    REQUIRE(in.B >= 2);
    auto m = models::load_model<float, cpu>(ck, options_of(c));
    auto rows = unpadded_rows(in);
    return {std::move(in), std::move(m), std::move(rows)};
}

// As transformers' greedy_nr_eos case: plain greedy decoding of these tiny random models repeats
// one token; the processors vary it. eos is the last id, which they hardly ever choose.
locost::generation::generation_options varied_options(const model_t& m, index_t new_tokens) {
    auto o = m.default_generation_options();
    o.max_new_tokens = new_tokens;
    o.repetition_penalty = 1.5;
    o.no_repeat_ngram_size = 2;
    o.min_length = 0;
    o.forced_eos_token_id.clear();
    o.eos_token_id = {m.config().vocab_size - 1};
    return o;
}

}  // namespace

TEST_CASE("generation: a greedy batch drops the documents it has finished, and every document's ids equal its own run") {
    int drops = 0;
    for (const auto& c : hf_cases) {
        CAPTURE(std::string(c.name));
        auto loaded = load_case(c);
        const batch& in = loaded.in;
        auto& m = loaded.m;
        const auto& enc_rows = loaded.rows;
        // Each document encoded alone, decoded together (what --max-batch-tokens runs); the
        // processors run over the rows left in the batch.
        const auto e = models::encode_each(m, enc_rows);
        auto o = varied_options(m, 12);
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
        rows_per_step<model_t> counted{m, {}};
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

// Continuous batching (generation/running_batch.hpp): documents join a batch that is already
// decoding, at different steps and each with options of its own (greedy, sampled with n choices,
// another length and other processors), and leave it when they end or are removed; each gets the
// ids of its own run, in every family (T5's relative positions, BART's and LED's learned ones,
// Pegasus-X's sinusoids: a row that joins late still starts at its own position 0).
TEST_CASE("generation: documents that join a running batch at different steps get the ids of their own runs") {
    using locost::generation::running_batch;
    for (const auto& c : hf_cases) {
        CAPTURE(std::string(c.name));
        auto loaded = load_case(c);
        const batch& in = loaded.in;
        auto& m = loaded.m;
        const auto& enc_rows = loaded.rows;
        const auto base = varied_options(m, 10);
        // Document k (of 4) reads input row k % B and joins after 3·k steps: 0 greedy; 1 sampled,
        // two choices; 2 greedy, 6 tokens, other processors; 3 as 1 with another seed, removed
        // after 4 of its steps.
        std::vector<locost::generation::generation_options> opts(4, base);
        opts[1].do_sample = true, opts[1].num_return_sequences = 2, opts[1].seed = 7, opts[1].temperature = 1.5, opts[1].top_k = 0;
        opts[2].max_new_tokens = 6, opts[2].no_repeat_ngram_size = 0, opts[2].repetition_penalty = 2.0;
        opts[3] = opts[1], opts[3].seed = 11;
        auto row_of = [&](index_t k) -> const std::vector<std::int64_t>& { return enc_rows[static_cast<std::size_t>(k % in.B)]; };
        std::vector<locost::generation::token_rows> alone(4);
        for (index_t k = 0; k < 3; ++k) {
            const auto& row = row_of(k);
            const auto one = m.encode(row.data(), nullptr, 1, static_cast<index_t>(row.size()));
            alone[static_cast<std::size_t>(k)] = locost::generation::generate(m, one, {row}, opts[static_cast<std::size_t>(k)]).sequences;
        }
        running_batch<model_t> rb(m);
        std::map<std::uint64_t, index_t> doc_of;
        std::map<index_t, locost::generation::token_rows> got;
        std::map<index_t, std::size_t> streamed;  // updates seen per document
        index_t most_rows = 0;
        std::uint64_t removed = 0;
        for (index_t s = 0; s < 40 && (s <= 9 || !rb.empty()); ++s) {
            if (s % 3 == 0 && s / 3 < 4) {
                const index_t k = s / 3;
                const auto& row = row_of(k);
                const auto key =
                    rb.add(m.encode(row.data(), nullptr, 1, static_cast<index_t>(row.size())), row, opts[static_cast<std::size_t>(k)]);
                doc_of[key] = k;
                if (k == 3) removed = key;
            }
            if (s == 13) rb.remove(removed);
            for (const auto& u : rb.step()) {
                const index_t k = doc_of.at(u.key);
                REQUIRE(u.error_id.empty());
                CHECK(static_cast<index_t>(u.tokens.size()) == (opts[static_cast<std::size_t>(k)].do_sample ? 2 : 1));
                ++streamed[k];
                if (u.done) got[k] = u.sequences;
            }
            most_rows = std::max(most_rows, rb.rows());
        }
        CHECK(rb.empty());
        CHECK(most_rows >= 4);     // documents did decode side by side
        CHECK(got.count(3) == 0);  // removed: no result, and no update after its removal
        CHECK(streamed[3] == 4);
        for (index_t k = 0; k < 3; ++k) {
            CAPTURE(k);
            REQUIRE(got.count(k) == 1);
            const auto& want = alone[static_cast<std::size_t>(k)];
            const std::string got_ids = show(got[k]), alone_ids = show(want);
            CAPTURE(got_ids);
            CAPTURE(alone_ids);
            REQUIRE(got[k].size() == want.size());
            const auto pad = opts[static_cast<std::size_t>(k)].pad_token();
            for (std::size_t j = 0; j < want.size(); ++j) CHECK(without_trailing(got[k][j], pad) == without_trailing(want[j], pad));
            CHECK(streamed[k] + 1 == got[k].front().size());
        }
    }
}

TEST_CASE("generation: a running batch refuses beam search with generate.beams_not_joinable") {
    const auto ck = locost::io::checkpoint::open(hf_dir + "/t5_v11");
    auto m = models::load_model<float, cpu>(ck, {});
    auto o = m.default_generation_options();
    o.num_beams = 2;
    locost::generation::running_batch<model_t> rb(m);
    const auto row = std::vector<std::int64_t>{5, 6, 1};
    try {
        rb.add(m.encode(row.data(), nullptr, 1, 3), row, o);
        FAIL("no error");
    } catch (const locost::error& e) {
        CHECK(std::string(e.id()) == "generate.beams_not_joinable");
        CHECK(std::string(e.message()) ==
              "beam search (num_beams 2) reorders the rows of a batch at every step and cannot take documents that join it; decode it "
              "with generate()");
    }
    CHECK(rb.empty());
}
