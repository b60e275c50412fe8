// Fuzzes model.safetensors.index.json parsing (the shard map a sharded checkpoint names its files
// with: every shard name must be a plain file name of the checkpoint directory).
#include <locost/io/safetensors.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto idx = locost::io::parse_safetensors_index(text, "fuzz/model.safetensors.index.json");
        for (const auto& s : idx.shards)
            if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..") __builtin_trap();
    } catch (const locost::error&) {}
    return 0;
}
