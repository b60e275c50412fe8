// TEMPORARY stand-in for pytorch.hpp (written in parallel by another helper) so that
// checkpoint.hpp compiles before it lands; checkpoint.hpp includes this file only while
// pytorch.hpp does not exist. Delete this file once pytorch.hpp is in the tree.
#pragma once
#include <string>
#include <vector>

#include "../config/error.hpp"
#include "tensor_record.hpp"

namespace locost::io {

inline std::vector<tensor_record> read_pytorch_bin(const std::string& path) {
    throw error("pytorch.unavailable", path + ": reading PyTorch checkpoints is not built yet");
}

} // namespace locost::io
