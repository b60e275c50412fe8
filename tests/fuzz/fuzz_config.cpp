// Fuzzes config.json (through the registry: every family's parser) and generation_config.json parsing.
#include <locost/locost.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        (void)locost::models::parse_config_text(text, "fuzz/config.json");
    } catch (const locost::error&) {}
    try {
        (void)locost::io::parse_generation_config(text, "fuzz/generation_config.json");
    } catch (const locost::error&) {}
    return 0;
}
