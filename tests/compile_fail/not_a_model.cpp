// Must NOT compile: generate() drives a models::seq2seq_model, and a model that cannot reorder
// its decoding rows (which beam search needs) is not one.
#include <locost/locost.hpp>

struct no_reorder {
    using scalar = float;
    struct encoded {
        std::vector<int> docs;
    };
    struct state {};
    locost::models::model_config cfg;
    const locost::models::model_config& config() const { return cfg; }
    state start(const encoded&, locost::index_t, locost::index_t) const { return {}; }
    void step(state&, const std::int64_t*, locost::index_t, float*) const {}
};

int main() {
    const no_reorder m;
    const auto o = locost::generation::default_generation_options(m.config());
    return static_cast<int>(locost::generation::generate(m, no_reorder::encoded{}, {}, o).steps);
}
