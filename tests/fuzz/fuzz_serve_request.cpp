// Fuzzes locost serve's request reader: the JSON body of /v1/completions and /v1/chat/completions
// (tools/locost/serve/request.hpp), then the generation options it found, read by the option
// table's records as the server reads them. Any input must end in a value or a locost::error.
#include <tools/locost/serve/request.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    for (auto kind : {locost::serve::endpoint::completions, locost::serve::endpoint::chat}) {
        try {
            const auto r = locost::serve::parse_request(body, kind);
            (void)locost::serve::given_of(r);
        } catch (const locost::error&) {}
    }
    return 0;
}
