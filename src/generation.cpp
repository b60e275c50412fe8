// locost::locost_compiled: greedy decoding, sampling and beam search over any_model<float, cpu> and
// any_model<double, cpu> (include/locost/compiled.hpp).
#define LOCOST_INSTANTIATING 1
#include <locost/locost.hpp>

LOCOST_COMPILED_GENERATION(template, float, ::locost::cpu)
LOCOST_COMPILED_GENERATION(template, double, ::locost::cpu)
