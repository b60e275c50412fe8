// The LongT5 family ("longt5"): a local or transient-global encoder (encoder.hpp) with T5's
// decoder (models/t5/decoder.hpp), as models/family.hpp describes a family.
#pragma once
#include <string>

#include "../t5/family.hpp"
#include "encoder.hpp"

namespace locost::models {

struct longt5_family : family_base<longt5_family, longt5_config> {
    static constexpr const char* name = "longt5";
    // What demo-checkpoint writes (its --help lists it).
    static constexpr const char* demo_shapes =
        "base: T5 base with local_radius 127, global_block_size 16 (long-t5-tglobal-base); tiny: radius 7, global blocks of 4";

    template <class Scalar, class Backend, class F>
    static decltype(auto) with_stacks(const config& c, F&& f) {
        return with_flag(c.transient_global(), [&](auto tglobal) -> decltype(auto) {
            return t5_conventions::with_stacks<Scalar, Backend>(
                c,
                [](auto act, auto gated) {
                    return std::type_identity<
                        longt5_encoder<Scalar, Backend, decltype(act)::value, decltype(gated)::value, decltype(tglobal)::value>>{};
                },
                f);
        });
    }

    static described describe(const config& c) {
        described extra = t5_conventions::relative_bias_fields(c);
        extra.insert(extra.end(),
                     {{"encoder_attention_type", c.encoder_attention_type},
                      {"local_radius", c.local_radius},
                      {"global_block_size", c.global_block_size}});
        return t5_conventions::describe(c, extra);
    }

    // The window's relative bias is one band (heads rows) from loading on; the transient-global
    // bias one more over the input's blocks, which the encoder keeps.
    static encoder_memory encoder_working_set(const config& c, const encoder_options&, const encoder_request& r) {
        return with_flag(c.transient_global(), [&](auto tglobal) {
            using inputs = layers::sliding_window_inputs<float, cpu, decltype(tglobal)::value>;
            const index_t I = c.num_heads * c.d_kv;
            const auto es = static_cast<double>(r.element);
            encoder_memory m = stack_memory(
                c.d_model, r,
                layers::sliding_window_attention<float, cpu, decltype(tglobal)::value>::scratch_elements(c.d_model, I, r.batch, r.length),
                t5_conventions::ff_scratch_per_row(c));
            m.tables.push_back(
                {"window band", band_elements(c.num_heads, inputs::band_reach(c.local_radius, c.global_block_size)) * es, ""});
            if (tglobal) {
                const index_t globals = inputs::global_band_reach(r.length, c.global_block_size);
                m.kept.push_back({"global bias band", band_elements(c.num_heads, globals) * es, r.grows_with});
                // Which rows each global block sums: an offset per block and a row id per token (int64).
                m.kept.push_back(
                    {"global block lists", static_cast<double>(r.batch * globals + 1 + r.batch * r.length) * 8.0, r.grows_with});
            }
            return m;
        });
    }

    // google/long-t5-tglobal-base (or its local twin, long-t5-local-base): T5 v1.1's shapes with
    // local_radius 127, global_block_size 16; tiny the Hugging Face references' (radius 7, blocks
    // of 4). Initialised as T5 (LongT5PreTrainedModel._init_weights), the global bias as the local one.
    static demo_plan demo(const std::string& size, index_t tiny_vocab, const std::string& attention) {
        if (attention != "local" && attention != "transient-global")
            throw error("cli.bad_value",
                        "demo-checkpoint: option '--encoder-attention-type' expects 'local' or 'transient-global', got '" + attention +
                            "'");
        demo_plan p = t5_family::demo(size, tiny_vocab, "");
        p.label = "LongT5";
        p.config["model_type"] = "longt5";
        p.config["architectures"] = {"LongT5ForConditionalGeneration"};
        p.config["encoder_attention_type"] = attention;
        p.config["local_radius"] = size == "tiny" ? 7 : 127;
        p.config["global_block_size"] = size == "tiny" ? 4 : 16;
        return p;
    }
};

}  // namespace locost::models
