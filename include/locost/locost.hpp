// locost: long-document seq2seq (LOCOST, SLED, local attention) as a header-only library.
//
// The one header to include. Configuration first, then the core, the backends, the I/O,
// and the models. See README.md for the API tour and docs for the error-id table.
#pragma once

#include "version.hpp"
#include "config/error.hpp"

#include "core/aligned.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"

#include "backend/backend.hpp"

#include "io/mapped_file.hpp"
#include "io/tensor_record.hpp"

#include "text/tokenizer.hpp"

#include "models/locost_parameters.hpp"
