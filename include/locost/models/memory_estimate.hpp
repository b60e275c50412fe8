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
//            capacity (beam search: twice, while rows are reordered; a running batch's rows:
//            four times, memory_request::joins_running_batch) + logits and search
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
#include <optional>
#include <string>
#include <vector>

#include "../backend/cpu/threads.hpp"
#include "../backend/cuda/workspace.hpp"
#include "../backend/device.hpp"
#include "../config/error.hpp"
#include "../layers/kv_cache.hpp"
#include "../runtime/system.hpp"
#include "memory_items.hpp"
#include "registry.hpp"

namespace locost::models {

// What is asked: the batch's shape and, for the encoder-decoder commands, the decoding.
struct memory_request {
    index_t batch = 1;              // documents (rows of input)
    index_t length = 1;             // positions per row after padding (the longest row)
    index_t valid_tokens = 0;       // real (unmasked) positions in all rows; 0: batch · length
    bool decoder = false;           // loads the decoder and builds the cross-attention cache
    index_t rows_per_document = 1;  // decoding rows per document (num_beams)
    index_t decoder_positions = 0;  // decoder positions per row: max_length − 1 (generate), T (score)
    bool beam_search = false;
    bool teacher_forcing = false;  // score: all positions in one step, logits kept for the output
    int threads = 0;               // 0: num_threads()
    // The documents are encoded one at a time and decoded together (encode_each): the encoder
    // holds one document, and each cache's precision is chosen by that document's own size, so
    // the cache is counted at the precision of the smallest (an upper bound).
    bool documents_alone = false;
    // The rows join a running batch (generation::running_batch, locost serve): a row that joins
    // rows already decoding sits behind them in a state of up to twice its own positions, and the
    // state is copied whenever rows join, so its self-attention cache counts four times.
    bool joins_running_batch = false;
    // Where the model runs: the CPU (host memory) or a GPU (its memory; the estimate then counts
    // what the CUDA backend holds on the device, see estimate_memory).
    device_kind device = device_kind::cpu;
    // What the user turns to change each quantity, for the items' `grows with` (the CLI names
    // its flags and the file a default came from).
    std::string length_driver = "the input length";
    std::string beams_driver = "num_beams";
    std::string positions_driver = "max_new_tokens";
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
            std::snprintf(head, sizeof head, "  %-7s %9s %s", p.name.c_str(), format_bytes(p.bytes()).c_str(),
                          p.name == top ? "(peak)" : "      ");
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

struct weight_bytes {
    double encoder = 0, decoder = 0, largest = 0;
};
// Bytes of one stored weight element of a matrix kept in precision p, per float32 byte (int8
// adds a float scale per output channel: under 1 % at these widths).
inline double stored_share(weight_precision p) { return ops::stored_bf16(p) ? 0.5 : ops::stored_i8(p) ? 0.25 : 1.0; }

// The weights the model holds at run time, per stack, from the record of what its layers read
// (registry.hpp, parameters()): each tensor in the form its layer keeps it — the scalar type, the
// decoder's per-step matrices in `p`, the large products' matrices in the compute precision, the
// S4D layers' complex-double factors — and a tied head only as the copy a reduced precision makes.
// A table both stacks read (the shared embedding) is counted by each: each keeps a converted copy.
inline weight_bytes weights_of(const any_config& c, std::size_t element, weight_precision p = weight_precision::native,
                               compute_precision compute = compute_precision::f32) {
    using layers::param_storage;
    weight_bytes w;
    const double e = static_cast<double>(element);
    for (const auto& r : parameters(c)) {
        const double stored = bytes_of(r.shape, element);
        double held = stored;
        switch (r.info.storage) {
        case param_storage::scalar: break;
        case param_storage::large_product: held = stored * stored_share(large_products(compute)); break;
        case param_storage::per_step: held = stored * stored_share(p); break;
        case param_storage::complex_per_value: held = stored / e * 16.0; break;
        case param_storage::complex_per_pair: held = stored / e * 8.0; break;
        case param_storage::folded_away: held = 0; break;
        }
        if (r.alias) held = p == weight_precision::native ? 0.0 : held;  // tied: the embedding serves as it is
        (r.stack == layers::model_stack::encoder ? w.encoder : w.decoder) += held;
        if (!r.alias) w.largest = std::max(w.largest, stored);
    }
    return w;
}

// The decoder's per-position widths: self/cross-attention inner size, heads, feed-forward.
struct decoder_dims {
    index_t layers, heads, inner, H, F;
};
inline decoder_dims decoder_of(const model_config& c) {
    return {c.num_decoder_layers, c.decoder_heads, c.decoder_heads * c.decoder_d_kv, c.d_model, c.decoder_d_ff};
}

// Bytes per position of one document's cross-attention cache in precision p (int8: a float
// scale per head and position for keys and values); folded: the encoder state alone (int8: one
// scale per position).
inline double cross_bytes_per_position(const decoder_dims& d, ops::kv_precision p, bool folded = false) {
    const double e = p == ops::kv_precision::f32 ? 4 : p == ops::kv_precision::bf16 ? 2 : 1;
    if (folded) return static_cast<double>(d.H) * e + (p == ops::kv_precision::i8 ? 4.0 : 0.0);
    return static_cast<double>(d.layers) * 2 *
        (static_cast<double>(d.inner) * e + (p == ops::kv_precision::i8 ? 4.0 * static_cast<double>(d.heads) : 0.0));
}

}  // namespace detail

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
            p.items.push_back(
                {"reduced-precision product scratch (at most)", static_cast<double>(cuda_workspace::linear_scratch_bytes), ""});
        double held = 0;
        for (const auto& i : p.items)
            if (!library_workspace(i)) held += i.bytes;
        p.items.push_back({"allocator rounding (at most)", held / 8, ""});
    }
    return est;
}
}  // namespace detail

// The estimate for `r` on the checkpoint's model (config `c`, run-time options `o`), computing in
// float32: host memory on the CPU backend; with r.device = cuda, the GPU memory the CUDA backend
// takes — the same model buffers (they live on the device), its own work areas
// (backend/cuda/workspace.hpp) instead of the CPU's per-thread ones, cuBLAS's workspace, and the
// caching allocator's rounding at its worst (1/8). Host-side memory of a GPU run (the mapped
// checkpoint, logits copied back) is not part of it.
inline memory_estimate estimate_memory(const any_config& family_config, const model_options& o, const memory_request& r) {
    const model_config& c = common(family_config);
    constexpr std::size_t e = sizeof(float);
    const bool gpu = r.device == device_kind::cuda;
    const bool reduced = o.weights != ops::weight_precision::native || o.encoder.compute != compute_precision::f32;
    const int threads = gpu ? 1 : r.threads > 0 ? r.threads : num_threads();
    const double es = static_cast<double>(e);
    const index_t B = std::max<index_t>(1, r.batch), L = std::max<index_t>(1, r.length);
    const double valid = r.valid_tokens > 0 ? static_cast<double>(r.valid_tokens) : static_cast<double>(B) * static_cast<double>(L);
    const detail::weight_bytes w = detail::weights_of(family_config, e, o.weights, o.encoder.compute);
    const auto sled = o.sled;

    memory_estimate est;
    // The GPU's fixed part: cuBLAS's workspace (32 MiB on recent GPUs; the attention partials are
    // added with the rounding, with_device_terms); the CUDA context itself is already missing from
    // the free memory.
    const memory_item runtime = gpu ? memory_item{"cuBLAS workspace", 32.0 * (1 << 20), ""} : memory_item{"runtime", 20e6, ""};
    const double weights = w.encoder + (r.decoder ? w.decoder : 0.0);
    const memory_item weight_item{"weights", weights, ""}, slack{"allocator slack", gpu ? 0.0 : 64e6, ""};
    const memory_item input{"input ids and mask", static_cast<double>(B) * static_cast<double>(L) * 24.0, r.length_driver};
    // The encoder's working set; SLED runs the backbone over batches of chunks.
    std::vector<memory_item> enc;
    std::vector<memory_item> kept;  // what the encoder keeps after encoding, and the layers' tables
    index_t eB = r.documents_alone ? 1 : B, eL = L;
    if (sled) {
        const index_t width = sled->context_size + (sled->prepend_prefix ? sled->prefix_length : 0);
        eL = std::min(width, L);
        eB = sled->chunk_batch > 0 ? sled->chunk_batch : std::max<index_t>(1, 4096 / std::max<index_t>(1, eL));
    }
    const encoder_memory m =
        encoder_working_set(family_config, o.encoder, {eB, eL, e, threads, r.device, sled ? "" : r.length_driver, o.encoder.tile_rows});
    enc = m.working;
    for (const auto& k : m.kept) kept.push_back(k);
    for (const auto& t : m.tables) kept.push_back(t);
    enc.insert(enc.end(), kept.begin(), kept.end());

    // While a tensor is converted its mapped pages, the float32 tensor and the copy the layer
    // keeps are resident together; the largest (the embedding) comes first in each stack, so the
    // worst moment is the decoder's embedding after the whole encoder.
    // On a GPU the conversion happens on the host; the device receives the weights one by one.
    if (gpu) {
        memory_phase p{"load", {runtime, weight_item}};
        p.items.insert(p.items.end(), m.tables.begin(), m.tables.end());
        est.phases.push_back(std::move(p));
    } else {
        memory_phase p{"load",
                       {runtime, {"weights", r.decoder ? w.encoder : 0.0, ""}, {"largest tensor in conversion", 3 * w.largest, ""}, slack}};
        p.items.insert(p.items.end(), m.tables.begin(), m.tables.end());
        est.phases.push_back(std::move(p));
    }
    const double states = static_cast<double>(r.documents_alone ? 1 : B) * static_cast<double>(L) * static_cast<double>(c.d_model) * es;
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
    const double f32_bytes = (r.documents_alone ? 1.0 : valid) * detail::cross_bytes_per_position(d, ops::kv_precision::f32, folded);
    const ops::kv_precision precision =
        choose_cross_precision(o, f32_bytes > 1.8e19 ? std::size_t(-1) : static_cast<std::size_t>(f32_bytes));
    const memory_item cross{std::string(folded ? "encoder states for folded cross-attention (" : "cross-attention cache (") +
                                precision_name(precision) + ")",
                            valid * detail::cross_bytes_per_position(d, precision, folded), r.length_driver};
    // The decoder projects the states to keys/values a tile (SLED: a chunk's kept rows) at a time
    // in a buffer it keeps (models/decoder_stack.hpp, fill_document).
    const double fill_rows =
        static_cast<double>(std::min(L, sled ? std::max<index_t>(1, sled->context_size) : std::max<index_t>(1, o.encoder.tile_rows)));
    const memory_item fill{"cross-attention fill scratch", folded ? 0.0 : fill_rows * 2 * static_cast<double>(d.inner) * es, ""};
    {
        memory_phase p{"cache", {runtime, weight_item, slack, input, fill}};
        p.items.insert(p.items.end(), kept.begin(), kept.end());
        if (sled) {
            p.items.insert(p.items.end(), enc.begin(), enc.end());
            p.items.push_back(cross);
        } else if (gpu) {
            // A device frees the states only whole, after the cache is filled: both are held.
            p.items.push_back({"encoder states", states, r.length_driver});
            p.items.push_back(cross);
        } else {
            // The host releases the states' pages tile by tile as the cache's pages fill; one
            // document at a time, the caches of those before stay beside its states.
            if (r.documents_alone) {
                p.items.push_back({"encoder states", states, r.length_driver});
                p.items.push_back(cross);
            } else {
                p.items.push_back(states > cross.bytes ? memory_item{"encoder states", states, r.length_driver} : cross);
            }
        }
        est.phases.push_back(std::move(p));
    }

    // Decoding: R rows of P positions at most.
    const double R = static_cast<double>(B) * static_cast<double>(std::max<index_t>(1, r.rows_per_document));
    const double P = static_cast<double>(std::max<index_t>(1, r.decoder_positions));
    const double V = static_cast<double>(c.vocab_size), inner = static_cast<double>(d.inner), heads = static_cast<double>(d.heads);
    const std::string rows_grow = r.rows_per_document > 1 ? r.beams_driver : std::string();
    const std::string both = rows_grow.empty() ? r.positions_driver : r.positions_driver + " and " + rows_grow;
    const double self = static_cast<double>(d.layers) * 2 * R * P * inner * es * (r.beam_search ? 2 : 1) * (r.joins_running_batch ? 4 : 1);
    const double step_rows = r.teacher_forcing ? R * P : R;
    const double per_row =
        static_cast<double>(d.H) + std::max({static_cast<double>(d.H) + 4 * inner, 2.0 * static_cast<double>(d.F) + d.H});
    double search = 0;
    if (r.teacher_forcing) search = R * P * V * es;  // the logits the command writes
    else {
        search = R * V * (es + 4.0) + R * P * 8.0;  // logits, scores; the rows' tokens
        if (r.beam_search) search += R * V * 24.0;  // candidates and their top-k
    }
    memory_phase p{"decode", {runtime, weight_item, slack, fill}};
    p.items.insert(p.items.end(), kept.begin(), kept.end());
    p.items.push_back(cross);
    p.items.push_back({"self-attention caches", self, both});
    p.items.push_back({r.teacher_forcing ? "logits" : "logits and search buffers", search,
                       r.teacher_forcing       ? r.positions_driver
                           : rows_grow.empty() ? std::string()
                                               : rows_grow});
    // folded: every row's q̃ and context per head (d_model wide), and the scores over L of the
    // queries in flight (at most 64 per thread, layers/kv_cache.hpp)
    const double folded_step = folded ? (step_rows * heads * 2 * static_cast<double>(d.H) +
                                         std::min(step_rows * heads, 64.0 * static_cast<double>(threads)) * static_cast<double>(L)) *
            es
                                      : 0.0;
    // (The self-attention's position bias and causal mask: one band of 2P − 1 values per head,
    // layers/position_band.hpp, whatever the number of positions per step.)
    p.items.push_back(
        {"step activations",
         step_rows * per_row * es + heads * (2 * P - 1) * es + static_cast<double>(threads) * 2 * static_cast<double>(L) * es + folded_step,
         r.teacher_forcing ? r.positions_driver : rows_grow});
    est.phases.push_back(std::move(p));
    return detail::with_device_terms(est, gpu, reduced);
}

using runtime::available_memory;
using runtime::memory_budget;

// Refuses an estimate over the budget. Error: memory.over_budget, naming the peak phase, its
// largest part and what that part grows with.
inline void check_memory_budget(const memory_estimate& est, const memory_budget& budget, const std::string& what) {
    if (est.peak() <= budget.bytes) return;
    const memory_item& big = est.largest();
    throw error("memory.over_budget",
                what + ": needs an estimated " + format_bytes(est.peak()) + " of memory at its peak (" + est.peak_phase().name +
                    "), more than the budget of " + format_bytes(budget.bytes) + " (" + budget.source + "); the largest part is " +
                    big.what + ", " + format_bytes(big.bytes) +
                    (big.grows_with.empty() ? std::string(" (fixed by the model)") : ", which grows with " + big.grows_with));
}

}  // namespace locost::models
