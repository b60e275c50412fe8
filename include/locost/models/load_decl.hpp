// Loading a checkpoint's model and its tokenizer, declared for the public API's light headers
// (locost/api.hpp). models/registry.hpp defines them: config.json's model_type picks the family.
// load_model and load_encoder for <float, cpu> and <double, cpu> are compiled in the library
// (locost/compiled.hpp); open_tokenizer is LOCOST_API (config/api.hpp).
#pragma once
#include <string>

#include "../config/api.hpp"
#include "../io/checkpoint_decl.hpp"
#include "../text/tokenizer_decl.hpp"
#include "any_model.hpp"
#include "options.hpp"

namespace locost::models {

// The checkpoint's encoder (through SLED when the checkpoint or the options ask for it).
// Errors: config.*, checkpoint.*, model.unsupported, sled.*.
template <class Scalar = float, class Backend = cpu>
any_encoder<Scalar, Backend> load_encoder(const io::checkpoint& ck, const model_options& o = {});

// The checkpoint's encoder-decoder, any family. Errors: those of load_encoder().
template <class Scalar = float, class Backend = cpu>
any_model<Scalar, Backend> load_model(const io::checkpoint& ck, const model_options& o = {});

// The tokenizer of a checkpoint directory (or a directory of tokenizer files), with the
// conventions its family adds where the files leave them open (text/conventions.hpp). A SLED
// repository without tokenizer files takes its backbone's, from `cache` when that names one.
LOCOST_API text::tokenizer open_tokenizer(const std::string& dir, const io::cache_location& cache = {});

}  // namespace locost::models
