// locost::locost_compiled: every family's model and encoder for <float, cpu> (include/locost/compiled.hpp).
#define LOCOST_INSTANTIATING 1
#include <locost/locost.hpp>

LOCOST_COMPILED_LOADERS(template, float, ::locost::cpu)
