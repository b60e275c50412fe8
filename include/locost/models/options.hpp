// Run-time options of every model, the progress an encode reports, and the checks every
// encoder applies to its input. Family-independent: the registry (models/registry.hpp) passes
// these to whichever family config.json names.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "../config/choice.hpp"
#include "../config/error.hpp"
#include "../core/index.hpp"
#include "../ops/precision.hpp"

namespace locost::models {

using ops::conv_mode;
inline constexpr choice conv_mode_names[] = {{"exact", int(conv_mode::exact)}, {"original-cuda", int(conv_mode::original_cuda)}};

// Arithmetic of the products over every input position: the encoder's linear layers and the
// cross-attention cache's key/value projection. f32 (the default) is exact float32. bf16 stores
// those weights in bfloat16 and rounds each product's input rows to bfloat16, with float32
// sums (weight_precision::bf16_products): twice float32's rate on CPUs with AVX512-BF16 or AMX,
// through oneDNN (backend/cpu/bf16_products.hpp). Everything else (normalisation, the S4D
// convolution, softmax, the residual stream) stays float32, and the decoder's per-step
// products follow `weights`. int8 stores those weights in int8 with a scale per output channel
// and quantizes each product's input rows to int8 with a scale per row, with exact int32 sums
// (weight_precision::i8_products): four times float32's multiply-adds per instruction with
// AVX512-VNNI or AMX, through oneDNN; the folded cross-attention's products are bfloat16 as
// under bf16. Accuracy and speed: tests/models/test_locost_decoder.cpp, bench/RESULTS.md.
enum class compute_precision { f32, bf16, i8 };
// (Named as every precision in locost is: float32, bfloat16, int8; fp32, f32 and bf16 alike.)
inline constexpr choice compute_precision_names[] = {
    {"float32", int(compute_precision::f32)},    {"bfloat16", int(compute_precision::bf16)}, {"int8", int(compute_precision::i8)},
    {"fp32", int(compute_precision::f32), true}, {"f32", int(compute_precision::f32), true}, {"bf16", int(compute_precision::bf16), true}};

inline const char* compute_name(compute_precision c) {
    return c == compute_precision::bf16 ? "bfloat16" : c == compute_precision::i8 ? "int8" : "float32";
}

// The weight precision of a large product under compute precision c.
inline ops::weight_precision large_products(compute_precision c) {
    switch (c) {
    case compute_precision::bf16: return ops::weight_precision::bf16_products;
    case compute_precision::i8: return ops::weight_precision::i8_products;
    case compute_precision::f32: break;
    }
    return ops::weight_precision::native;
}

struct encoder_options {
    // Precision of the encoder's linear layers (and of the cross-attention cache's projection).
    compute_precision compute = compute_precision::f32;
    // LOCOST. exact: the convolution as defined (default). original_cuda: the original CUDA
    // path's FFT-size quirk, which the released checkpoints were trained with
    // (ops/bidirectional_conv.hpp).
    conv_mode conv = conv_mode::exact;
    // LOCOST: bytes of S4D kernels kept between calls, for all layers together (0: never cache).
    std::size_t kernel_cache_bytes = std::size_t{1} << 30;
    // Rows per tile of the pointwise steps (GEMM M dimension).
    index_t tile_rows = 1024;
    // T5 self-attention: query rows per block, so that scores and bias take heads·block·L
    // values, never heads·L² (a 16K-token T5 input would need 12.9 GB for its bias alone).
    index_t attention_query_block = 512;
    // LED (Longformer attention): positions given global attention in every row (they attend to
    // and are attended by every token); positions past a row's padding are not global there, as
    // in Hugging Face's global_attention_mask · attention_mask. Default: the first token, what
    // LED's summarization users set.
    std::vector<index_t> global_tokens = {0};
};

// SLED (Ivgi et al. 2022; models/sled.hpp): the backbone encoder slides over the document in
// chunks of context_size tokens, keeping each chunk's middle window_fraction; the first
// prefix_length ids of every row (a question) are prepended to every chunk and, with
// encode_prefix, also encoded alone and put first.
struct sled_options {
    index_t context_size = 256;
    double window_fraction = 0.5;
    index_t prefix_length = 0;
    bool prepend_prefix = true;
    bool encode_prefix = true;
    // Chunks encoded together (0: enough to give every thread rows to work on, see sled.hpp).
    index_t chunk_batch = 0;
};

// Where an encode() is. A plain encoder reports its layers: `layer` in [0, layers) is running,
// tokens_done of `tokens` in that layer. SLED reports chunks (chunk of chunks done). A seq2seq
// model then building the decoder's cross-attention cache reports cross_cache = true.
struct encode_progress {
    index_t layer = 0, layers = 0, tokens_done = 0, tokens = 0;
    bool cross_cache = false;
    index_t chunk = 0, chunks = 0;  // SLED: chunks encoded so far of chunks (0 when not SLED)
};
using progress_callback = std::function<void(const encode_progress&)>;

// Precision of the cross-attention cache (the memory that grows with the input: layers × 2 ×
// L × heads·d_kv values). automatic picks by the size the float32 cache would have for the
// batch: float32 up to 128 MiB (base model: ≤ 1820 tokens), bfloat16 up to 8 GiB (≤ 233K
// tokens), int8 with a scale per (head, position) beyond (700K tokens: 12.8 GB + 0.8 GB of
// scales). Why: a decoding step is memory-bound — it reads the decoder's weights (base: 496 MB)
// and the whole cache — so once the cache is a sizeable share of those bytes, halving it makes
// every token faster (base, 4K tokens: the float32 cache is 302 MB, 38 % of a step's reads);
// below 128 MiB the gain is under 12 % and float32 keeps the reference numbers exactly. The
// accuracy each costs (bfloat16: ~4e-5 relative logit error, int8: ~6e-5; greedy ids unchanged)
// is measured in tests/models/test_locost_decoder.cpp and bench/RESULTS.md.
enum class cross_cache_precision { automatic, f32, bf16, i8 };
inline constexpr choice cross_cache_precision_names[] = {
    {"auto", int(cross_cache_precision::automatic)}, {"float32", int(cross_cache_precision::f32)},
    {"bfloat16", int(cross_cache_precision::bf16)},  {"int8", int(cross_cache_precision::i8)},
    {"fp32", int(cross_cache_precision::f32), true}, {"f32", int(cross_cache_precision::f32), true},
    {"bf16", int(cross_cache_precision::bf16), true}};

// Storage of the decoder's per-step weights (self-attention, cross-attention q and o, feed-forward)
// and of its LM head: the scalar type (native: float32, exact, the default), bfloat16, or int8
// with a scale per output channel (layers/weight_matrix.hpp). A decoding step reads each of them
// once, so its time follows their bytes (base: 496 MB, 248 MB, 124 MB). The encoder and the
// cross-attention key/value projections (large GEMMs, once per document) follow
// encoder_options::compute instead. Accuracy and speed of each: tests/models/test_locost_decoder.cpp, bench/RESULTS.md.
using ops::weight_precision;
// The storages --weights selects (the *_products ones follow --compute).
inline constexpr choice weight_precision_names[] = {
    {"float32", int(weight_precision::native)},   {"bfloat16", int(weight_precision::bf16)},
    {"int8", int(weight_precision::i8)},          {"fp32", int(weight_precision::native), true},
    {"f32", int(weight_precision::native), true}, {"bf16", int(weight_precision::bf16), true}};

inline const char* weights_name(weight_precision p) {
    switch (p) {
    case weight_precision::native: return "float32";
    case weight_precision::bf16: return "bfloat16";
    case weight_precision::i8: return "int8";
    case weight_precision::bf16_products: return "bfloat16 (with bfloat16 products)";
    case weight_precision::i8_products: return "int8 (with int8 products)";
    }
    return "?";
}

// How the decoder attends to a document. cached (the default): every layer's keys and values
// are projected from the encoder states once and kept (layers × 2 × L × heads·d_kv values).
// folded: only the states are kept (L × d_model values, in the cross_cache precision), and
// each step folds the key projection into the query and the value projection after the
// weighted sum (layers/kv_cache.hpp, folded_cross_attention) — the same function, a cache
// 2·layers·heads·d_kv / d_model times smaller (base: 24×), no per-layer projection of the
// input, and heads times more arithmetic per decoding step. For book-length inputs where the
// cache, not the time, is the limit.
enum class cross_attention_form { cached, folded };
inline constexpr choice cross_attention_form_names[] = {{"cached", int(cross_attention_form::cached)},
                                                        {"folded", int(cross_attention_form::folded)}};

inline const char* cross_attention_name(cross_attention_form f) { return f == cross_attention_form::folded ? "folded" : "cached"; }

struct model_options {
    encoder_options encoder;
    cross_cache_precision cross_cache = cross_cache_precision::automatic;
    cross_attention_form cross_attention = cross_attention_form::cached;
    weight_precision weights = weight_precision::native;
    std::size_t automatic_f32_max_bytes = std::size_t{128} << 20;
    std::size_t automatic_bf16_max_bytes = std::size_t{8} << 30;
    // Run the encoder through SLED with these settings (a SLED config.json sets them too).
    std::optional<sled_options> sled;
};

inline ops::kv_precision choose_cross_precision(const model_options& o, std::size_t f32_bytes) {
    switch (o.cross_cache) {
    case cross_cache_precision::f32: return ops::kv_precision::f32;
    case cross_cache_precision::bf16: return ops::kv_precision::bf16;
    case cross_cache_precision::i8: return ops::kv_precision::i8;
    case cross_cache_precision::automatic: break;
    }
    if (f32_bytes <= o.automatic_f32_max_bytes) return ops::kv_precision::f32;
    if (f32_bytes <= 2 * o.automatic_bf16_max_bytes) return ops::kv_precision::bf16;
    return ops::kv_precision::i8;
}

inline const char* precision_name(ops::kv_precision p) {
    switch (p) {
    case ops::kv_precision::native: return "native";
    case ops::kv_precision::f32: return "float32";
    case ops::kv_precision::bf16: return "bfloat16";
    case ops::kv_precision::i8: return "int8";
    }
    return "?";
}

// Checks a (B, L) batch of encoder ids against the vocabulary and its 0/1 mask (may be null).
// Errors: encode.empty_input, ids.out_of_vocab, encode.bad_mask; messages start with `source`.
inline void check_encoder_input(const std::string& source, index_t vocab_size, const std::int64_t* ids, const float* mask, index_t B,
                                index_t L) {
    if (B <= 0 || L <= 0)
        throw error("encode.empty_input",
                    source + ": nothing to encode (batch " + std::to_string(B) + " x length " + std::to_string(L) + ")");
    for (index_t i = 0; i < B * L; ++i) {
        if (ids[i] < 0 || ids[i] >= vocab_size)
            throw error("ids.out_of_vocab",
                        source + ": token id " + std::to_string(ids[i]) + " at [" + std::to_string(i / L) + "][" + std::to_string(i % L) +
                            "] is not in [0, " + std::to_string(vocab_size) + ")");
        if (mask && mask[i] != 0.0f && mask[i] != 1.0f)
            throw error("encode.bad_mask",
                        source + ": attention mask value " + std::to_string(mask[i]) + " at [" + std::to_string(i / L) + "][" +
                            std::to_string(i % L) + "] is not 0 or 1");
    }
}

}  // namespace locost::models
