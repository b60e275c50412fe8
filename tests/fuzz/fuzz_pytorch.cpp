// Fuzzes the PyTorch .bin reader: zip directory, ZIP64 records, restricted unpickler, tensor views.
#include <locost/locost.hpp>

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // A private copy so the reader may keep pointers into it through `owner`.
    auto buf = std::shared_ptr<std::byte[]>(new std::byte[size ? size : 1]);
    if (size) std::memcpy(buf.get(), data, size);
    try {
        const auto recs = locost::io::read_pytorch_bin_buffer(buf.get(), size, "fuzz.bin", buf);
        volatile unsigned char sink = 0;
        for (const auto& r : recs)
            for (std::size_t i = 0; i < r.nbytes; i += 61) sink = sink + static_cast<unsigned char>(r.bytes[i]);
        (void)sink;
    } catch (const locost::error&) {}
    return 0;
}
