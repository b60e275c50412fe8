// locost::locost_compiled: the public API's non-template functions (LOCOST_API, include/locost/config/api.hpp),
// defined here once: opening a checkpoint, opening a tokenizer.
#define LOCOST_DEFINING_API 1
#include <locost/locost.hpp>
