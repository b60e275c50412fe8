// The memory a request will need, computed from config.json, the checkpoint's tensor list, the
// options and the input's shape alone — before anything large is allocated — so that a request
// the machine cannot hold is refused up front, naming its cause, instead of running for minutes
// and dying in the allocator (or in the kernel's OOM killer).
//
// A request goes through phases; what is resident in one phase is summed, and the peak is the
// largest phase:
//   load     the largest tensor three times over (its mapped pages, the float32 tensor and the
//            layer's copy) on top of what is loaded before it; the mapped file's pages are
//            dropped tensor by tensor as they are converted
//   encode   weights + the encoder's working set, written per family below from the same
//            formulas the layers size their buffers with (scratch_elements(), scratch_per_row())
//   cache    (score, generate, summarize) weights + what the encoder keeps (LOCOST: its kernel
//            cache) + the larger of the states and the cross-attention cache: the states are
//            released tile by tile as the cache fills (models/seq2seq.hpp)
//   decode   weights + the cross-attention cache + every row's self-attention cache at full
//            capacity (beam search: twice, while rows are reordered) + logits and search
//            buffers + one step's activations
// Every item names what it grows with (the input length, --num-beams, --max-new-tokens, ...), so
// that a refusal can say which knob to turn. Worst cases are counted: a generation that may run
// to max_new_tokens is estimated at max_new_tokens.
//
// Every later phase also holds the weights in their runtime form (float32) and the allocator's
// slack: freed conversion buffers under glibc's mmap threshold that the heap keeps (measured:
// ~60 MB for the base models).
//
// Accuracy: bench/RESULTS.md compares the estimate with measured peak RSS (base LOCOST demo,
// encode and summarize, 4K to 697K tokens). Not counted: the process's code and libraries (the
// `runtime` item, a constant) and the operating system's page cache.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "../backend/cpu/threads.hpp"
#include "../backend/cuda/workspace.hpp"
#include "../backend/device.hpp"
#include "../config/error.hpp"
#include "../layers/bart_attention.hpp"
#include "../layers/bart_feed_forward.hpp"
#include "../layers/feed_forward.hpp"
#include "../layers/gated_s4d.hpp"
#include "../layers/global_local_attention.hpp"
#include "../layers/longformer_attention.hpp"
#include "../layers/longt5_attention.hpp"
#include "../layers/s4d_kernel.hpp"
#include "../layers/t5_attention.hpp"
#include "../ops/bidirectional_conv.hpp"
#include "registry.hpp"

namespace locost::models {

// "2.68 TB", "812 MB", "4.0 KB": decimal units, three significant digits.
inline std::string format_bytes(double b) {
    const char* unit[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
    int u = 0;
    while (b >= 999.5 && u < 6) b /= 1000.0, ++u;
    char s[48];
    if (u == 0) std::snprintf(s, sizeof s, "%.0f B", b);
    else std::snprintf(s, sizeof s, b >= 99.95 ? "%.0f %s" : b >= 9.995 ? "%.1f %s" : "%.2f %s", b, unit[u]);
    return s;
}

// What is asked: the batch's shape and, for the encoder-decoder commands, the decoding.
struct memory_request {
    index_t batch = 1;         // documents (rows of input)
    index_t length = 1;        // positions per row after padding (the longest row)
    index_t valid_tokens = 0;  // real (unmasked) positions in all rows; 0: batch · length
    bool decoder = false;      // loads the decoder and builds the cross-attention cache
    index_t rows_per_document = 1;  // decoding rows per document (num_beams)
    index_t decoder_positions = 0;  // decoder positions per row: max_length − 1 (generate), T (score)
    bool beam_search = false;
    bool teacher_forcing = false;   // score: all positions in one step, logits kept for the output
    int threads = 0;                   // 0: num_threads()
    // Where the model runs: the CPU (host memory) or a GPU (its memory; the estimate then counts
    // what the CUDA backend holds on the device, see estimate_memory).
    device_kind device = device_kind::cpu;
    // What the user turns to change each quantity, for the items' `grows with` (the CLI names
    // its flags and the file a default came from).
    std::string length_driver = "the input length";
    std::string beams_driver = "num_beams";
    std::string positions_driver = "max_new_tokens";
};

struct memory_item {
    std::string what;
    double bytes = 0;
    std::string grows_with;  // empty: a constant of the model
};

struct memory_phase {
    std::string name;
    std::vector<memory_item> items;
    double bytes() const {
        double b = 0;
        for (const auto& i : items) b += i.bytes;
        return b;
    }
};

struct memory_estimate {
    std::vector<memory_phase> phases;

    const memory_phase& peak_phase() const {
        LOCOST_ASSERT(!phases.empty());
        return *std::max_element(phases.begin(), phases.end(), [](const auto& a, const auto& b) { return a.bytes() < b.bytes(); });
    }
    double peak() const { return peak_phase().bytes(); }
    // The largest item of the peak phase: what a refusal names.
    const memory_item& largest() const {
        const auto& p = peak_phase();
        return *std::max_element(p.items.begin(), p.items.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
    }
    // One line per phase: "decode  15.0 GB  = weights 0.97 GB + cross-attention cache 13.6 GB + ...".
    std::string table() const {
        std::string out;
        const std::string& top = peak_phase().name;
        for (const auto& p : phases) {
            char head[64];
            std::snprintf(head, sizeof head, "  %-7s %9s %s", p.name.c_str(), format_bytes(p.bytes()).c_str(), p.name == top ? "(peak)" : "      ");
            out += head;
            const char* sep = " = ";
            for (const auto& i : p.items) {
                if (i.bytes < 0.5e6 && p.items.size() > 1) continue;  // under 0.5 MB: noise in the table
                out += sep + i.what + " " + format_bytes(i.bytes);
                sep = " + ";
            }
            out += "\n";
        }
        return out;
    }
};

namespace detail {

inline double bytes_of(const shape_t& s, std::size_t element) {
    double n = 1;
    for (index_t d : s) n *= static_cast<double>(d);
    return n * static_cast<double>(element);
}

// Which stack reads a parameter: the encoder, the decoder (the LM head and its bias too), or
// both (the shared embedding: the encoder and the decoder each keep a converted copy).
enum class weight_part { encoder, decoder, both };
inline weight_part part_of(const std::string& name) {
    const auto ends = [&](const char* s) {
        const std::string t(s);
        return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
    };
    if (ends("shared.weight")) return weight_part::both;
    if (name.find("decoder.") != std::string::npos || name.rfind("lm_head.", 0) == 0 || name == "final_logits_bias") return weight_part::decoder;
    return weight_part::encoder;
}

struct weight_bytes {
    double encoder = 0, decoder = 0, largest = 0;
};
// Bytes of one stored weight element of the decoder's per-step matrices in precision p, per
// float32 byte (int8 adds a float scale per output channel: under 1 % at these widths).
inline double stored_share(weight_precision p) {
    return ops::stored_bf16(p) ? 0.5 : ops::stored_i8(p) ? 0.25 : 1.0;
}

// A decoder matrix that model_options::weights stores in reduced precision: every 2-D decoder
// weight except the cross-attention keys/values (large GEMMs, kept) and position tables.
inline bool per_step_matrix(const std::string& name, const shape_t& shape) {
    if (shape.size() != 2 || name.find("decoder.") == std::string::npos) return name.rfind("lm_head.", 0) == 0;
    for (const char* kept : {"EncDecAttention.k.", "EncDecAttention.v.", "encoder_attn.k_proj.", "encoder_attn.v_proj.", "embed_positions",
                             "embed_tokens", "relative_attention_bias"})
        if (name.find(kept) != std::string::npos) return false;
    return true;
}

// A matrix of a large product, which compute = bf16 (int8) stores in bfloat16 (int8): an encoder layer's
// projection or feed-forward weight, or the cross-attention keys/values.
inline bool large_product_matrix(const std::string& name, const shape_t& shape, weight_part part) {
    if (shape.size() != 2) return false;
    if (part == weight_part::decoder)
        return name.find("EncDecAttention.k.") != std::string::npos || name.find("EncDecAttention.v.") != std::string::npos ||
               name.find("encoder_attn.k_proj.") != std::string::npos || name.find("encoder_attn.v_proj.") != std::string::npos;
    for (const char* kept : {"shared", "embed", "relative_attention_bias", "kernel.", "global_tokens", "position"})
        if (name.find(kept) != std::string::npos) return false;
    return part == weight_part::encoder;
}

// An S4D layer does not keep its stored parameters (layers/s4d_kernel.hpp): it keeps, in complex
// double, exp(Δ·A) per (H, modes) — 16 bytes where inv_A_real has one value — and the effective C
// per (channels, H, modes) — 16 bytes where C has two; A_imag and B are folded into those (a device
// backend holds its copy of the factors instead of the host). Runtime bytes per stored byte.
inline double s4d_runtime_share(const std::string& name, std::size_t element) {
    auto ends = [&](const char* tail) {
        const std::string t = tail;
        return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
    };
    const double e = static_cast<double>(element);
    if (ends(".kernel.inv_A_real")) return 16.0 / e;
    if (ends(".kernel.C")) return 8.0 / e;
    if (ends(".kernel.A_imag") || ends(".kernel.B")) return 0.0;
    return 1.0;
}

inline weight_bytes weights_of(const model_config& c, std::size_t element, weight_precision p = weight_precision::native,
                               compute_precision compute = compute_precision::f32) {
    weight_bytes w;
    for (const auto& q : expected_parameters(c)) {
        const bool tied_head = q.name.rfind("lm_head.", 0) == 0 && c.tie_word_embeddings;
        const double b = bytes_of(q.shape, element);
        // Tied, the embedding serves as the head; in a reduced precision the head is a copy of it.
        if (tied_head) {
            if (p != weight_precision::native) w.decoder += b * stored_share(p);
            continue;
        }
        const weight_part part = part_of(q.name);
        const double large = large_product_matrix(q.name, q.shape, part) ? stored_share(large_products(compute)) : 1.0;
        if (part != weight_part::decoder) w.encoder += b * large * s4d_runtime_share(q.name, element);
        if (part != weight_part::encoder) w.decoder += per_step_matrix(q.name, q.shape) ? b * stored_share(p) : b * large;
        w.largest = std::max(w.largest, b);
    }
    return w;
}

// The decoder's per-position widths: self/cross-attention inner size, heads, feed-forward.
struct decoder_dims {
    index_t layers, heads, inner, H, F;
};
inline decoder_dims decoder_of(const model_config& c) {
    if (const auto* b = dynamic_cast<const bart_config*>(&c)) return {c.num_decoder_layers, b->decoder_attention_heads, c.d_model, c.d_model, b->decoder_ffn_dim};
    if (const auto* x = dynamic_cast<const pegasus_x_config*>(&c))
        return {c.num_decoder_layers, x->decoder_attention_heads, c.d_model, c.d_model, x->decoder_ffn_dim};
    return {c.num_decoder_layers, c.num_heads, c.num_heads * c.d_kv, c.d_model, c.d_ff};
}

// Bytes per position of one document's cross-attention cache in precision p (int8: a float
// scale per head and position for keys and values); folded: the encoder state alone (int8: one
// scale per position).
inline double cross_bytes_per_position(const decoder_dims& d, ops::kv_precision p, bool folded = false) {
    const double e = p == ops::kv_precision::f32 ? 4 : p == ops::kv_precision::bf16 ? 2 : 1;
    if (folded) return static_cast<double>(d.H) * e + (p == ops::kv_precision::i8 ? 4.0 : 0.0);
    return static_cast<double>(d.layers) * 2 * (static_cast<double>(d.inner) * e + (p == ops::kv_precision::i8 ? 4.0 * static_cast<double>(d.heads) : 0.0));
}

// The working set of a dense (attention) encoder over (B, L): states plus the layer scratch,
// the larger of one layer's attention and one tile of its feed-forward.
inline std::vector<memory_item> attention_encoder_items(const model_config& c, const encoder_options& o, index_t B, index_t L,
                                                        std::size_t e, const std::string& grows, device_kind device = device_kind::cpu) {
    const index_t H = c.d_model, F = c.d_ff, rows = B * L, tile = std::max<index_t>(1, std::min(o.tile_rows, rows));
    using S = float;
    index_t attention = 0, ff_row = 0, extra = 0;
    if (const auto* x = dynamic_cast<const pegasus_x_config*>(&c)) {
        attention = layers::global_local_attention<S, cpu>::scratch_elements(H, H, x->num_global_tokens, B, L);
        ff_row = layers::bart_feed_forward<S, cpu, activation::gelu_erf, true>::scratch_per_row(H, F);
        extra = B * x->num_global_tokens * H;  // the global tokens' states
    } else if (dynamic_cast<const led_config*>(&c)) {
        // The layer reserves rows for up to L global tokens per row; only the chosen ones are
        // ever written, and untouched pages are not host memory (a device commits them all).
        const index_t G = std::min<index_t>(L, static_cast<index_t>(o.global_tokens.size()));
        attention = layers::longformer_self_attention<S, cpu>::scratch_elements(H, H, B, L) -
                    (device == device_kind::cuda ? 0 : (B * L - B * G) * (H + 4 * H + 1));
        ff_row = layers::bart_feed_forward<S, cpu, activation::gelu_erf, false>::scratch_per_row(H, F);
    } else if (dynamic_cast<const bart_config*>(&c)) {
        attention = layers::bart_encoder_self_attention<S, cpu>::scratch_elements(H, B, L, o.attention_query_block);
        ff_row = layers::bart_feed_forward<S, cpu, activation::gelu_erf, false>::scratch_per_row(H, F);
    } else if (const auto* g = dynamic_cast<const longt5_config*>(&c)) {
        const index_t I = c.num_heads * c.d_kv;
        attention = is_transient_global(*g) ? layers::longt5_self_attention<S, cpu, true>::scratch_elements(H, I, B, L)
                                            : layers::longt5_self_attention<S, cpu, false>::scratch_elements(H, I, B, L);
        ff_row = c.is_gated_act ? layers::feed_forward<S, cpu, activation::relu, true>::scratch_per_row(H, F)
                                : layers::feed_forward<S, cpu, activation::relu, false>::scratch_per_row(H, F);
    } else {
        attention = layers::t5_encoder_self_attention<S, cpu>::scratch_elements(H, c.num_heads * c.d_kv, c.num_heads, B, L,
                                                                                 o.attention_query_block);
        ff_row = c.is_gated_act ? layers::feed_forward<S, cpu, activation::relu, true>::scratch_per_row(H, F)
                                : layers::feed_forward<S, cpu, activation::relu, false>::scratch_per_row(H, F);
    }
    const double es = static_cast<double>(e);
    std::vector<memory_item> v = {{"encoder states", static_cast<double>(rows) * static_cast<double>(H) * es, grows},
                                  {"layer scratch", static_cast<double>(std::max(attention, tile * ff_row)) * es, grows}};
    if (extra) v.push_back({"global-token states", static_cast<double>(extra) * es, ""});
    return v;
}

// The LOCOST encoder's working set over (B, L) (models/locost/encoder.hpp, layers/gated_s4d.hpp,
// backend/cpu/bidirectional_conv.hpp). Second: the kernel cache, which the encoder keeps.
inline std::pair<std::vector<memory_item>, memory_item> locost_encoder_items(const locost_config& c, const encoder_options& o, index_t B,
                                                                             index_t L, std::size_t e, int threads, const std::string& grows,
                                                                             device_kind device = device_kind::cpu) {
    const index_t H = c.d_model, F = c.d_ff, rows = B * L, ch = c.bidirectional ? 2 : 1, tile = std::max<index_t>(1, std::min(o.tile_rows, rows));
    const double es = static_cast<double>(e), T = threads;
    const index_t per_row = std::max(layers::gated_s4d<float, cpu, true, true>::scratch_per_row(H),
                                     c.is_gated_act ? layers::feed_forward<float, cpu, activation::relu, true>::scratch_per_row(H, F)
                                                    : layers::feed_forward<float, cpu, activation::relu, false>::scratch_per_row(H, F));
    const ops::conv_geometry geo = ops::conv_geometry::make(L, ops::conv_options{o.conv});
    const double M = static_cast<double>(geo.M), G = static_cast<double>(std::clamp<index_t>((index_t{1} << 22) / geo.M, 1, 16));
    // Kernel cache: layers take H·channels·L values each while the budget lasts; the others
    // generate their kernels per channel group (scratch per thread, s4d_kernel::compute).
    const double per_layer = static_cast<double>(H * ch) * static_cast<double>(L) * es;
    const double cached = std::min(static_cast<double>(c.num_layers), std::floor(static_cast<double>(o.kernel_cache_bytes) / per_layer));
    double conv = 0, generation = 0, cufft = 0;
    if (device == device_kind::cuda) {
        // backend/cuda/ssm.cu: one FFT group's buffers (always the FFT form), and the S4D passes:
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
    std::vector<memory_item> v = {{"encoder states", static_cast<double>(rows) * static_cast<double>(H) * es, grows},
                                  {"convolution buffer", static_cast<double>(rows) * static_cast<double>(H) * es, grows},
                                  {"tiles", static_cast<double>(tile * per_row) * es, ""},
                                  {"FFT groups", conv + generation, grows}};
    // cuFFT's own, outside locost's allocator (so not rounded by it).
    if (cufft > 0) v.push_back({"cuFFT work areas (approximate)", cufft, grows});
    return {v, {"kernel cache", cached * per_layer, "the input length, up to its budget"}};
}

} // namespace detail

namespace detail {
// Names of the GPU-only items that the libraries hold outside locost's caching allocator.
inline bool library_workspace(const memory_item& i) { return i.what == "cuBLAS workspace" || i.what == "cuFFT work areas (approximate)"; }

// On a GPU every phase also holds, at most, the attention kernel's split-row partials (one block
// per call from the caching allocator, backend/cuda/attention.cu) and, with bfloat16 or int8
// weights or products, one linear layer's scratch (backend/cuda/linear.cu), and the allocator rounds every
// block up by at most 1/8 (backend/block_cache.hpp): counted at that bound over the blocks it
// holds, so that a run the estimate lets through does not meet cuda.out_of_memory.
inline memory_estimate with_device_terms(memory_estimate est, bool gpu, bool reduced_precision) {
    if (!gpu) return est;
    for (auto& p : est.phases) {
        // glibc's heap slack is a host matter
        std::erase_if(p.items, [](const memory_item& i) { return i.what == "allocator slack"; });
        p.items.push_back({"attention partials (at most)", static_cast<double>(cuda_workspace::attention_partial_bytes), ""});
        if (reduced_precision && p.name != "load")
            p.items.push_back({"reduced-precision product scratch (at most)", static_cast<double>(cuda_workspace::linear_scratch_bytes), ""});
        double held = 0;
        for (const auto& i : p.items)
            if (!library_workspace(i)) held += i.bytes;
        p.items.push_back({"allocator rounding (at most)", held / 8, ""});
    }
    return est;
}
} // namespace detail

// The estimate for `r` on the checkpoint's model (config `c`, run-time options `o`), computing in
// float32: host memory on the CPU backend; with r.device = cuda, the GPU memory the CUDA backend
// takes — the same model buffers (they live on the device), its own work areas
// (backend/cuda/workspace.hpp) instead of the CPU's per-thread ones, cuBLAS's workspace, and the
// caching allocator's rounding at its worst (1/8). Host-side memory of a GPU run (the mapped
// checkpoint, logits copied back) is not part of it.
inline memory_estimate estimate_memory(const model_config& c, const model_options& o, const memory_request& r) {
    constexpr std::size_t e = sizeof(float);
    const bool gpu = r.device == device_kind::cuda;
    const bool reduced = o.weights != ops::weight_precision::native || o.encoder.compute != compute_precision::f32;
    const int threads = gpu ? 1 : r.threads > 0 ? r.threads : num_threads();
    const double es = static_cast<double>(e);
    const index_t B = std::max<index_t>(1, r.batch), L = std::max<index_t>(1, r.length);
    const double valid = r.valid_tokens > 0 ? static_cast<double>(r.valid_tokens) : static_cast<double>(B) * static_cast<double>(L);
    const detail::weight_bytes w = detail::weights_of(c, e, o.weights, o.encoder.compute);
    const auto sled = o.sled;

    memory_estimate est;
    // The GPU's fixed part: cuBLAS's workspace (32 MiB on recent GPUs; the attention partials are
    // added with the rounding, with_device_terms); the CUDA context itself is already missing from
    // the free memory.
    const memory_item runtime = gpu ? memory_item{"cuBLAS workspace", 32.0 * (1 << 20), ""} : memory_item{"runtime", 20e6, ""};
    const double weights = w.encoder + (r.decoder ? w.decoder : 0.0);
    const memory_item weight_item{"weights", weights, ""}, slack{"allocator slack", gpu ? 0.0 : 64e6, ""};
    const memory_item input{"input ids and mask", static_cast<double>(B) * static_cast<double>(L) * 24.0, r.length_driver};
    // While a tensor is converted its mapped pages, the float32 tensor and the copy the layer
    // keeps are resident together; the largest (the embedding) comes first in each stack, so the
    // worst moment is the decoder's embedding after the whole encoder.
    // On a GPU the conversion happens on the host; the device receives the weights one by one.
    if (gpu) est.phases.push_back({"load", {runtime, weight_item}});
    else est.phases.push_back({"load", {runtime, {"weights", r.decoder ? w.encoder : 0.0, ""}, {"largest tensor in conversion", 3 * w.largest, ""}, slack}});

    // The encoder's working set; SLED runs the backbone over batches of chunks.
    std::vector<memory_item> enc;
    std::optional<memory_item> kept;  // what the encoder keeps after encoding
    index_t eB = B, eL = L;
    if (sled) {
        const index_t width = sled->context_size + (sled->prepend_prefix ? sled->prefix_length : 0);
        eL = std::min(width, L);
        eB = sled->chunk_batch > 0 ? sled->chunk_batch : std::max<index_t>(1, 4096 / std::max<index_t>(1, eL));
    }
    if (const auto* l = dynamic_cast<const locost_config*>(&c)) {
        auto [items, cache] = detail::locost_encoder_items(*l, o.encoder, eB, eL, e, threads, sled ? "" : r.length_driver, r.device);
        enc = std::move(items);
        kept = cache;
        enc.push_back(cache);
    } else {
        enc = detail::attention_encoder_items(c, o.encoder, eB, eL, e, sled ? "" : r.length_driver, r.device);
    }
    const double states = static_cast<double>(B) * static_cast<double>(L) * static_cast<double>(c.d_model) * es;
    if (sled) {
        for (auto& i : enc) i.what = "chunk " + i.what;
        if (!r.decoder) enc.push_back({"encoder output", states, r.length_driver});
    }
    {
        memory_phase p{"encode", {runtime, weight_item, slack, input}};
        p.items.insert(p.items.end(), enc.begin(), enc.end());
        est.phases.push_back(std::move(p));
    }
    if (!r.decoder) return detail::with_device_terms(est, gpu, reduced);

    // The cross-attention cache, in the precision the model will choose for this batch.
    const detail::decoder_dims d = detail::decoder_of(c);
    const bool folded = o.cross_attention == cross_attention_form::folded;
    const double f32_bytes = valid * detail::cross_bytes_per_position(d, ops::kv_precision::f32, folded);
    const ops::kv_precision precision =
        choose_cross_precision(o, f32_bytes > 1.8e19 ? std::size_t(-1) : static_cast<std::size_t>(f32_bytes));
    const memory_item cross{std::string(folded ? "encoder states for folded cross-attention (" : "cross-attention cache (") +
                                precision_name(precision) + ")",
                            valid * detail::cross_bytes_per_position(d, precision, folded), r.length_driver};
    // The decoder projects the states to keys/values a tile (SLED: a chunk's kept rows) at a time
    // in a buffer it keeps (models/t5/decoder.hpp, fill_document).
    const double fill_rows = static_cast<double>(
        std::min(L, sled ? std::max<index_t>(1, sled->context_size) : std::max<index_t>(1, o.encoder.tile_rows)));
    const memory_item fill{"cross-attention fill scratch", folded ? 0.0 : fill_rows * 2 * static_cast<double>(d.inner) * es, ""};
    {
        memory_phase p{"cache", {runtime, weight_item, slack, input, fill}};
        if (kept) p.items.push_back(*kept);
        if (sled) {
            p.items.insert(p.items.end(), enc.begin(), enc.end());
            p.items.push_back(cross);
        } else if (gpu) {
            // A device frees the states only whole, after the cache is filled: both are held.
            p.items.push_back({"encoder states", states, r.length_driver});
            p.items.push_back(cross);
        } else {
            // The host releases the states' pages tile by tile as the cache's pages fill.
            p.items.push_back(states > cross.bytes ? memory_item{"encoder states", states, r.length_driver} : cross);
        }
        est.phases.push_back(std::move(p));
    }

    // Decoding: R rows of P positions at most.
    const double R = static_cast<double>(B) * static_cast<double>(std::max<index_t>(1, r.rows_per_document));
    const double P = static_cast<double>(std::max<index_t>(1, r.decoder_positions));
    const double V = static_cast<double>(c.vocab_size), inner = static_cast<double>(d.inner), heads = static_cast<double>(d.heads);
    const std::string rows_grow = r.rows_per_document > 1 ? r.beams_driver : std::string();
    const std::string both = rows_grow.empty() ? r.positions_driver : r.positions_driver + " and " + rows_grow;
    const double self = static_cast<double>(d.layers) * 2 * R * P * inner * es * (r.beam_search ? 2 : 1);
    const double step_rows = r.teacher_forcing ? R * P : R;
    const double per_row = static_cast<double>(d.H) + std::max({static_cast<double>(d.H) + 4 * inner, 2.0 * static_cast<double>(d.F) + d.H});
    double search = 0;
    if (r.teacher_forcing) search = R * P * V * es;  // the logits the command writes
    else {
        search = R * V * (es + 4.0) + R * P * 8.0;  // logits, scores; the rows' tokens
        if (r.beam_search) search += R * V * 24.0;  // candidates and their top-k
    }
    memory_phase p{"decode", {runtime, weight_item, slack, fill}};
    if (kept) p.items.push_back(*kept);
    p.items.push_back(cross);
    p.items.push_back({"self-attention caches", self, both});
    p.items.push_back({r.teacher_forcing ? "logits" : "logits and search buffers", search, r.teacher_forcing ? r.positions_driver : rows_grow.empty() ? std::string() : rows_grow});
    // folded: every row's q̃ and context per head (d_model wide), and the scores over L of the
    // queries in flight (at most 64 per thread, layers/kv_cache.hpp)
    const double folded_step = folded ? (step_rows * heads * 2 * static_cast<double>(d.H) +
                                         std::min(step_rows * heads, 64.0 * static_cast<double>(threads)) * static_cast<double>(L)) * es
                                      : 0.0;
    // (The self-attention's position bias and causal mask: one band of 2P − 1 values per head,
    // layers/kv_cache.hpp's causal_band, whatever the number of positions per step; Pegasus-X
    // also keeps its sinusoidal rows of the P positions, layers/sinusoidal_positions.hpp.)
    const double position_rows = dynamic_cast<const pegasus_x_config*>(&c) ? P * static_cast<double>(d.H) * es : 0.0;
    p.items.push_back({"step activations", step_rows * per_row * es + heads * (2 * P - 1) * es + position_rows +
                                               static_cast<double>(threads) * 2 * static_cast<double>(L) * es + folded_step,
                       r.teacher_forcing ? r.positions_driver : rows_grow});
    est.phases.push_back(std::move(p));
    return detail::with_device_terms(est, gpu, reduced);
}

// The memory a request may use: by default what the machine has available now — the smallest of
// /proc/meminfo's MemAvailable, the cgroup's memory.max less its memory.current (containers,
// Kubernetes limits) and RLIMIT_AS less the address space already mapped (ulimit -v).
struct memory_budget {
    double bytes = 0;
    std::string source;
};
inline memory_budget available_memory() {
    memory_budget b{1.8e19, "no limit found"};
    auto take = [&](double v, const char* why) {
        if (v >= 0 && v < b.bytes) b = {v, why};
    };
    auto read_kb = [](const char* file, const char* key) -> double {
        std::ifstream f(file);
        std::string k;
        double v;
        std::string unit;
        while (f >> k >> v) {
            std::getline(f, unit);
            if (k == key) return v * 1024.0;
        }
        return -1;
    };
    take(read_kb("/proc/meminfo", "MemAvailable:"), "available memory");
    {
        std::ifstream mx("/sys/fs/cgroup/memory.max"), cur("/sys/fs/cgroup/memory.current");
        std::string m;
        double c = 0;
        if (mx >> m && m != "max" && cur >> c) take(std::stod(m) - c, "the cgroup's memory.max");
    }
    rlimit rl{};
    if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        const double used = read_kb("/proc/self/status", "VmSize:");
        take(static_cast<double>(rl.rlim_cur) - std::max(0.0, used), "RLIMIT_AS (ulimit -v)");
    }
    return b;
}

// Refuses an estimate over the budget. Error: memory.over_budget, naming the peak phase, its
// largest part and what that part grows with.
inline void check_memory_budget(const memory_estimate& est, const memory_budget& budget, const std::string& what) {
    if (est.peak() <= budget.bytes) return;
    const memory_item& big = est.largest();
    throw error("memory.over_budget",
                what + ": needs an estimated " + format_bytes(est.peak()) + " of memory at its peak (" + est.peak_phase().name +
                    "), more than the budget of " + format_bytes(budget.bytes) + " (" + budget.source + "); the largest part is " + big.what +
                    ", " + format_bytes(big.bytes) + (big.grows_with.empty() ? std::string(" (fixed by the model)") : ", which grows with " + big.grows_with));
}

} // namespace locost::models
