// locost::locost_compiled: every family's model and encoder for <double, cpu>, the reference path
// (include/locost/compiled.hpp).
#define LOCOST_INSTANTIATING 1
#include <locost/locost.hpp>

LOCOST_COMPILED_LOADERS(template, double, ::locost::cpu)
