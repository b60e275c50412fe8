// Fuzzes the token-id JSON input of `locost encode --ids`.
#include <locost/locost.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto batch = locost::io::parse_ids_json(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
        locost::io::check_ids_vocab(batch, 32100, "fuzz.json");
    } catch (const locost::error&) {}
    return 0;
}
