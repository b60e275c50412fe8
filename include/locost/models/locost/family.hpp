// The LOCOST family ("locost"): a gated bidirectional S4D encoder (encoder.hpp) with T5's decoder
// (models/t5/decoder.hpp), as models/family.hpp describes a family.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>

#include "../../backend/cuda/workspace.hpp"
#include "../../layers/s4d_kernel.hpp"
#include "../../ops/bidirectional_conv.hpp"
#include "../t5/family.hpp"
#include "encoder.hpp"

namespace locost::models {

struct locost_family : family_base<locost_family, locost_config> {
    static constexpr const char* name = "locost";
    // What demo-checkpoint writes (its --help lists it).
    static constexpr const char* demo_shapes =
        "base: d_model 768, d_state 512, d_ff 2048, 12+12 layers, 12 heads, vocab 32100, gated-gelu (the paper's pretraining config); tiny: d_state 16";
    // LOCOST's code pins transformers 4.27.1: its beam search is that version's.
    static constexpr generation::beam_convention beam_convention = generation::beam_convention::hf_4_27;

    template <class Scalar, class Backend, class F>
    static decltype(auto) with_stacks(const config& c, F&& f) {
        return with_flag(c.bidirectional, [&](auto bidir) -> decltype(auto) {
            return with_flag(c.gating, [&](auto gate) -> decltype(auto) {
                return t5_conventions::with_stacks<Scalar, Backend>(
                    c,
                    [](auto act, auto gated) {
                        return std::type_identity<locost_encoder<Scalar, Backend, decltype(bidir)::value, decltype(gate)::value,
                                                                 decltype(act)::value, decltype(gated)::value>>{};
                    },
                    f);
            });
        });
    }

    // Error: model.unsupported for num_ssm_heads other than 1.
    static void check_loadable(const config& c) {
        if (c.num_ssm_heads != 1)
            throw error("model.unsupported",
                        c.source + ": num_ssm_heads is " + std::to_string(c.num_ssm_heads) +
                            ", only 1 is supported (the original code runs num_ssm_heads > 1 only on its CUDA path, whose channel "
                            "grouping is not specified; the released LOCOST checkpoints use 1)");
    }

    static described describe(const config& c) {
        described v =
            t5_conventions::describe(c, {{"num_ssm_heads", c.num_ssm_heads}, {"bidirectional", c.bidirectional}, {"gating", c.gating}});
        v.insert(v.begin() + 2, {"d_state", c.d_state});
        return v;
    }

    // The encoder's working set over (B, L) (encoder.hpp, layers/gated_s4d.hpp,
    // backend/cpu/bidirectional_conv.hpp); it keeps its kernel cache after.
    static encoder_memory encoder_working_set(const config& c, const encoder_options& o, const encoder_request& r) {
        const index_t H = c.d_model, B = r.batch, L = r.length, rows = B * L, ch = c.bidirectional ? 2 : 1;
        const index_t tile = std::max<index_t>(1, std::min(r.tile_rows, rows));
        const double es = static_cast<double>(r.element), T = r.threads;
        const index_t per_row =
            std::max(layers::gated_s4d<float, cpu, true, true>::scratch_per_row(H), t5_conventions::ff_scratch_per_row(c));
        const ops::conv_geometry geo = ops::conv_geometry::make(L, ops::conv_options{o.conv});
        const double M = static_cast<double>(geo.M), G = static_cast<double>(std::clamp<index_t>((index_t{1} << 22) / geo.M, 1, 16));
        // Kernel cache: layers take H·channels·L values each while the budget lasts; the others
        // generate their kernels per channel group (scratch per thread, s4d_kernel::compute).
        const double per_layer = static_cast<double>(H * ch) * static_cast<double>(L) * es;
        const double cached =
            std::min(static_cast<double>(c.num_layers), std::floor(static_cast<double>(o.kernel_cache_bytes) / per_layer));
        double conv = 0, generation = 0, cufft = 0;
        if (r.device == device_kind::cuda) {
            // backend/cuda/bidirectional_conv.cu and ssm_kernels.cu: one FFT group's buffers (always the FFT form), and the S4D passes:
            // all H kernels of a layer when its cache is filled, before the convolution's buffers
            // exist (gated_s4d::prepare_kernels), or a group's inside the convolution for a layer
            // without a cache; cuFFT's two plans keep a work area of about one spectrum each (not
            // reported by cuFFT before planning: approximate).
            const index_t Mg = geo.M, group = cuda_workspace::conv_group(Mg, H), modes = c.d_state / 2;
            conv = static_cast<double>(cuda_workspace::conv_group_elements(Mg, L, H, ch)) * es;
            cufft = 2.0 * static_cast<double>(group) * static_cast<double>(2 * (Mg / 2 + 1)) * es;
            if (cached < static_cast<double>(c.num_layers))
                conv += static_cast<double>(cuda_workspace::s4d_pass::make(L, modes, ch, group).elements()) * es;
            if (cached > 0) conv = std::max(conv, static_cast<double>(cuda_workspace::s4d_pass::make(L, modes, ch, H).elements()) * es);
        } else {
            conv = T * G * (static_cast<double>(ch * L) + (geo.direct ? 0.0 : M + 4 * (M / 2 + 1))) * es;
            if (cached < static_cast<double>(c.num_layers)) {
                const index_t bt = std::min(layers::s4d_kernel<float, cpu>::block_length(L), L), blocks = (L + bt - 1) / bt, N = c.d_state;
                generation = T * static_cast<double>(bt * N + ch * blocks * (N + bt)) * es;
            }
        }
        encoder_memory m;
        m.working = {{"encoder states", static_cast<double>(rows) * static_cast<double>(H) * es, r.grows_with},
                     {"convolution buffer", static_cast<double>(rows) * static_cast<double>(H) * es, r.grows_with},
                     {"tiles", static_cast<double>(tile * per_row) * es, ""},
                     {"FFT groups", conv + generation, r.grows_with}};
        // cuFFT's own, outside locost's allocator (so not rounded by it).
        if (cufft > 0) m.working.push_back({"cuFFT work areas (approximate)", cufft, r.grows_with});
        m.kept = {{"kernel cache", cached * per_layer, "the input length, up to its budget"}};
        return m;
    }

    // configs/pretraining/locost_default.yaml (base: d_model 768, d_state 512, 12 + 12 layers), or
    // tiny (the shared reference's dimensions).
    static demo_plan demo(const std::string& size, index_t tiny_vocab, const std::string&) {
        io::json j = {{"vocab_size", 32100}, {"d_model", 768},   {"d_state", 512},           {"d_kv", 64},
                      {"d_ff", 2048},        {"num_layers", 12}, {"num_decoder_layers", 12}, {"num_heads", 12}};
        if (size == "tiny")
            j = {{"vocab_size", tiny_vocab}, {"d_model", 64},           {"d_state", 16}, {"d_kv", 16}, {"d_ff", 128},
                 {"num_layers", 2},          {"num_decoder_layers", 2}, {"num_heads", 4}};
        else if (size != "base") bad_demo_size(size);
        j.update({{"num_ssm_heads", 1},
                  {"local_radius", 127},
                  {"global_block_size", 16},
                  {"relative_attention_num_buckets", 32},
                  {"relative_attention_max_distance", 128},
                  {"dropout_rate", 0.0},
                  {"layer_norm_epsilon", 1e-6},
                  {"initializer_factor", 1.0},
                  {"feed_forward_proj", "gated-gelu"},
                  {"encoder_attention_type", "local"},
                  {"use_cache", true},
                  {"use_fast_fft_conv", false},
                  {"bidirectional", true},
                  {"gating", true},
                  {"tie_word_embeddings", true},
                  {"is_encoder_decoder", true},
                  {"pad_token_id", 0},
                  {"eos_token_id", 1},
                  {"decoder_start_token_id", 0},
                  {"architectures", {"LOCOSTForConditionalGeneration"}},
                  {"model_type", "locost"},
                  {"locost_demo_checkpoint", demo_label}});
        demo_plan p;
        p.label = "LOCOST";
        p.config = j;
        // LOCOSTPreTrainedModel._init_weights, SSKernelDiag.__init__ (ssm_init "diag-lin") and PyTorch's
        // defaults for what those leave alone: norms 1; shared, relative biases and D N(0, 1); wi
        // N(0, d_model^-½), wo N(0, d_ff^-½); log_dt U[log 1e-3, log 1e-1], A = −0.5 + iπn, B = 1, C
        // complex normal of unit variance; every other Linear U(±1/√fan_in) for weight and bias.
        const double H = j["d_model"].get<double>(), F = j["d_ff"].get<double>();
        p.init = [H, F](const layers::param_record& r) {
            using layers::param_kind;
            switch (r.info.kind) {
            case param_kind::norm_scale: return init_rule::constant(1.0);
            case param_kind::embedding:
            case param_kind::relative_bias:
            case param_kind::s4d_d: return init_rule::normal(1.0);
            case param_kind::ff_in: return init_rule::normal(std::pow(H, -0.5));
            case param_kind::ff_out: return init_rule::normal(std::pow(F, -0.5));
            case param_kind::s4d_log_dt: return init_rule::uniform(std::log(1e-3), std::log(1e-1));
            case param_kind::s4d_a_real: return init_rule::constant(std::log(0.5));
            case param_kind::s4d_a_imag: return init_rule::of(init_rule::kind::s4d_frequency);
            case param_kind::s4d_b: return init_rule::of(init_rule::kind::s4d_unit_real);
            case param_kind::s4d_c: return init_rule::normal(std::sqrt(0.5));  // real and imaginary parts each N(0, 1/2)
            default: {
                const double fan_in = r.info.kind == param_kind::bias ? H : static_cast<double>(r.shape.back());
                return init_rule::uniform(-1.0 / std::sqrt(fan_in), 1.0 / std::sqrt(fan_in));
            }
            }
        };
        return p;
    }
};

}  // namespace locost::models
