// What a program that opens a checkpoint, tokenizes, encodes and generates calls (examples/embed.cpp):
// io::checkpoint::open, models::open_tokenizer / text::open_tokenizer, models::load_model,
// models::any_model, generation::generate and their options and results.
//
// Linked to locost::locost_compiled (LOCOST_COMPILED=1), this is light headers only: declarations
// whose definitions and instantiations the library holds for <float, cpu> and <double, cpu>, so
// a unit that includes it parses none of the model, loader or tokenizer code. Header-only (no
// LOCOST_COMPILED), it is the whole library, locost/locost.hpp. A unit that instantiates its own
// configurations (another scalar type, backend or structure) includes locost/locost.hpp.
#pragma once

#if defined(LOCOST_COMPILED) && LOCOST_COMPILED
#include "config/error.hpp"
#include "generation/generate_decl.hpp"
#include "io/checkpoint_decl.hpp"
#include "models/load_decl.hpp"
#include "text/tokenizer_decl.hpp"
#include "version.hpp"
#else
#include "locost.hpp"
#endif
