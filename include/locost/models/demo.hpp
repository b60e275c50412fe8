// What `locost demo-checkpoint` writes for a family: a config.json of the family's base or tiny
// shape, the generation and tokenizer settings its checkpoints carry, which tokenizer it ships
// with, and how each tensor is initialised — the way the family's original code initialises a
// fresh model, so activations stay in a realistic range. The weights are seeded random numbers,
// never trained: everything written says so.
//
// A family gives one init_rule per recorded tensor (layers/tensor_source.hpp: the same record
// that validates a checkpoint, so the demo has exactly the tensors the loader reads); the tool
// draws the numbers (tools/locost: one seeded stream over the tensors in record order).
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "../config/error.hpp"
#include "../io/json.hpp"
#include "../layers/tensor_source.hpp"

namespace locost::models {

struct init_rule {
    enum class kind {
        constant,       // every value a
        normal,         // N(0, a)
        uniform,        // U[a, b)
        s4d_frequency,  // A_imag: π·(k mod modes) — S4D-Lin's frequencies
        s4d_unit_real,  // B: (1, 0) pairs
    };
    kind how = kind::constant;
    double a = 0, b = 0;
    std::optional<index_t> zero_row;  // a row set to 0 afterwards (an embedding's padding_idx)

    static init_rule constant(double v) { return of(kind::constant, v); }
    static init_rule normal(double sd) { return of(kind::normal, sd); }
    static init_rule uniform(double lo, double hi) { return of(kind::uniform, lo, hi); }
    static init_rule of(kind how, double a = 0, double b = 0) {
        init_rule r;
        r.how = how, r.a = a, r.b = b;
        return r;
    }
};

struct demo_plan {
    const char* label = "";  // the family as messages name it ("BART")
    io::json config;
    io::json generation;              // generation_config.json, when the family's checkpoints carry one
    io::json tokenizer_config;        // tokenizer_config.json, when the family's numbering needs one
    bool byte_bpe = false;            // ships vocab.json + merges.txt (else a SentencePiece model)
    int sentencepiece_id_offset = 0;  // the numbering the SentencePiece model is read with
    std::function<init_rule(const layers::param_record&)> init;
};

// The label every demo config carries.
inline constexpr const char* demo_label =
    "UNTRAINED: seeded random weights written by 'locost demo-checkpoint'; outputs are not meaningful";

// demo sizes are "base" and "tiny". Error: cli.bad_value.
[[noreturn]] inline void bad_demo_size(const std::string& name) {
    throw error("cli.bad_value", "demo-checkpoint: option '--config' expects 'base' or 'tiny', got '" + name + "'");
}

}  // namespace locost::models
