// What a checkpoint reader produces for one stored tensor: its name, storage dtype, shape,
// the file it came from, and a pointer to its contiguous little-endian bytes. The bytes live
// in a mapping or buffer that `owner` keeps alive, so records can outlive the reader.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "../core/dtype.hpp"
#include "../core/tensor.hpp"

namespace locost::io {

struct tensor_record {
    std::string name;
    dtype type = dtype::f32;
    shape_t shape;
    std::string source;                 // path of the file holding it
    const std::byte* bytes = nullptr;   // contiguous, row-major, little-endian
    std::size_t nbytes = 0;             // == shape.numel() * size_of(type)
    std::shared_ptr<const void> owner;  // keeps `bytes` valid
    // bytes point into a read-only file mapping (not a private copy): a loader that has
    // converted them may hand the pages back to the OS (they are re-read from the file if needed).
    bool file_backed = false;
};

}  // namespace locost::io
