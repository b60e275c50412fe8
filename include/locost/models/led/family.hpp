// The LED family ("led"): a Longformer encoder (encoder.hpp) with BART's decoder
// (models/bart/decoder.hpp) under "led", as models/family.hpp describes a family.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "../bart/family.hpp"
#include "encoder.hpp"

namespace locost::models {

struct led_family : family_base<led_family, led_config>, activation_stacks<led_encoder, bart_decoder> {
    static constexpr const char* name = "led";
    // What demo-checkpoint writes (its --help lists it).
    static constexpr const char* demo_shapes =
        "base: BART base with windows of 1024 and 16384 encoder positions (led-base-16384); tiny: windows of 16";

    static described describe(const config& c) {
        return describe_bart_style(c, c,
                                   {{"attention_window", c.attention_window},
                                    {"max_encoder_position_embeddings", c.max_encoder_positions},
                                    {"max_decoder_position_embeddings", c.max_position_embeddings}},
                                   {});
    }

    // The layer reserves rows for up to L global tokens per row; only the chosen ones are ever
    // written, and untouched pages are not host memory (a device commits them all).
    static encoder_memory encoder_working_set(const config& c, const encoder_options& o, const encoder_request& r) {
        const index_t rows = r.batch * r.length, H = c.d_model;
        const index_t G = std::min<index_t>(r.length, static_cast<index_t>(o.global_tokens.size()));
        const index_t unwritten = r.device == device_kind::cuda ? 0 : (rows - r.batch * G) * (H + 4 * H);
        const index_t attention =
            layers::sliding_window_global_attention<float, cpu>::scratch_elements(H, H, r.batch, r.length) - unwritten;
        encoder_memory m = stack_memory(H, r, attention, bart_conventions::ff_scratch_per_row(c));
        double bands = 0;  // each layer's window as a mask
        for (index_t w : c.attention_window) bands += band_elements(0, layers::sliding_window_global_attention<float, cpu>::band_reach(w));
        m.tables.push_back({"window bands", bands * static_cast<double>(r.element), ""});
        return m;
    }

    // allenai/led-base-16384's shape (BART base with windows of 1024 and 16384 encoder positions),
    // or tiny (the references': windows of 16). Initialised as BART (LEDPreTrainedModel._init_weights).
    static demo_plan demo(const std::string& size, index_t tiny_vocab, const std::string&) {
        demo_plan p = bart_family::demo(size, tiny_vocab, "");
        p.label = "LED";
        const index_t layers = p.config["encoder_layers"].get<index_t>(), window = size == "tiny" ? 16 : 1024;
        p.config.erase("max_position_embeddings");
        p.config.erase("scale_embedding");
        p.config["max_encoder_position_embeddings"] = 16384;
        p.config["max_decoder_position_embeddings"] = 1024;
        p.config["attention_window"] = std::vector<index_t>(static_cast<std::size_t>(layers), window);
        p.config["architectures"] = {"LEDForConditionalGeneration"};
        p.config["model_type"] = "led";
        p.generation = {{"bos_token_id", 0}, {"decoder_start_token_id", 2}, {"eos_token_id", 2}, {"pad_token_id", 1}};
        return p;
    }
};

}  // namespace locost::models
