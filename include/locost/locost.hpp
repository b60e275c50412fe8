// locost: long-document seq2seq (LOCOST, T5, SLED over any encoder) as a header-only library.
//
// The one header to include. Configuration first, then the core, the backends, the ops, the
// I/O, the layers and the models. README.md has the API tour and the table of error ids.
#pragma once

#include "version.hpp"
#include "config/error.hpp"

#include "core/aligned.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"

#include "backend/backend.hpp"
#include "backend/cpu/cpu.hpp"

#include "ops/attention.hpp"
#include "ops/bidirectional_conv.hpp"
#include "ops/elementwise.hpp"
#include "ops/embedding.hpp"
#include "ops/fft.hpp"
#include "ops/gemm.hpp"
#include "ops/ssm_kernels.hpp"

#include "io/checkpoint.hpp"
#include "io/config.hpp"
#include "io/ids_json.hpp"
#include "io/json.hpp"
#include "io/mapped_file.hpp"
#include "io/safetensors.hpp"
#include "io/tensor_record.hpp"

#include "text/sentencepiece.hpp"
#include "text/tokenizer.hpp"

#include "layers/bart_attention.hpp"
#include "layers/bart_feed_forward.hpp"
#include "layers/feed_forward.hpp"
#include "layers/gated_s4d.hpp"
#include "layers/kv_cache.hpp"
#include "layers/layer_norm.hpp"
#include "layers/learned_positions.hpp"
#include "layers/relative_position_bias.hpp"
#include "layers/rms_norm.hpp"
#include "layers/s4d_kernel.hpp"
#include "layers/t5_attention.hpp"

#include "models/concepts.hpp"
#include "models/config.hpp"
#include "models/feed_forward_weights.hpp"
#include "models/options.hpp"
#include "models/seq2seq.hpp"
#include "models/sled.hpp"
#include "models/locost/config.hpp"
#include "models/locost/encoder.hpp"
#include "models/locost/parameters.hpp"
#include "models/locost/traits.hpp"
#include "models/bart/config.hpp"
#include "models/bart/decoder.hpp"
#include "models/bart/encoder.hpp"
#include "models/bart/parameters.hpp"
#include "models/decoder_state.hpp"
#include "models/longt5/config.hpp"
#include "models/longt5/parameters.hpp"
#include "models/t5/config.hpp"
#include "models/t5/decoder.hpp"
#include "models/t5/encoder.hpp"
#include "models/t5/parameters.hpp"
#include "models/registry.hpp"

#include "generation/logits_processors.hpp"
#include "generation/options.hpp"
#include "generation/search.hpp"
