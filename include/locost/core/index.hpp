// The index type, and the names of the tensor types for headers that only mention them
// (core/tensor.hpp defines them).
#pragma once
#include <cstdint>

#include "../backend/backend.hpp"

namespace locost {

using index_t = std::int64_t;

struct shape_t;
template <class T, class Backend = cpu>
class tensor;

}  // namespace locost
