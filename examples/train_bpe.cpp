// train_bpe: trains a byte-level BPE vocabulary on text files and writes vocab.json + merges.txt
// (text/byte_bpe_trainer.hpp: GPT-2 pre-tokenization, BART's special tokens at ids 0..4, the 256
// byte symbols, then merges; deterministic). The repository's examples/data/books-bpe was made
// with it (examples/data/PROVENANCE.md has the command).
//
// usage: train_bpe --out DIR [--vocab-size N] [--min-frequency F] FILE...
// Each file is read whole (as encode() later reads a book). Exit status 2 for misuse, 1 for other
// errors, printed as "train_bpe: [locost.<id>] <message>".
#include <locost/text/byte_bpe_trainer.hpp>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr const char* usage = "usage: train_bpe --out DIR [--vocab-size N] [--min-frequency F] FILE...\n"
                              "\n"
                              "Trains a byte-level BPE vocabulary on the text files and writes DIR/vocab.json and DIR/merges.txt:\n"
                              "<s> <pad> </s> <unk> <mask> (ids 0..4, as BART), the 256 byte symbols, then the merges.\n"
                              "\n"
                              "  --out DIR            output directory (created)\n"
                              "  --vocab-size N       entries of vocab.json (default 16000)\n"
                              "  --min-frequency F    never merge a pair seen fewer than F times (default 2)\n";

std::uint64_t number(const char* option, const char* s) {
    std::uint64_t v = 0;
    const auto [p, ec] = std::from_chars(s, s + std::strlen(s), v);
    if (ec != std::errc() || *p != '\0' || v > (std::uint64_t{1} << 31))
        throw locost::error("cli.bad_value",
                            std::string("train_bpe: option '") + option + "' expects a non-negative integer, got '" + s + "'");
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        locost::text::byte_bpe_training options;
        std::string out;
        std::vector<std::string> files;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            if (a == "--help" || a == "-h") {
                std::fputs(usage, stdout);
                return 0;
            }
            if (a == "--out" || a == "--vocab-size" || a == "--min-frequency") {
                if (i + 1 >= argc) throw locost::error("cli.missing_value", "train_bpe: option '" + a + "' needs a value");
                const char* v = argv[++i];
                if (a == "--out") out = v;
                else if (a == "--vocab-size") options.vocab_size = number("--vocab-size", v);
                else options.min_frequency = number("--min-frequency", v);
            } else if (a.rfind("--", 0) == 0) {
                throw locost::error("cli.unknown_option", "train_bpe: unknown option '" + a + "' (see 'train_bpe --help')");
            } else {
                files.push_back(a);
            }
        }
        if (out.empty()) throw locost::error("cli.missing_option", "train_bpe: option '--out' is required (see 'train_bpe --help')");
        if (files.empty()) throw locost::error("cli.missing_option", "train_bpe: no input files (see 'train_bpe --help')");

        const auto t0 = std::chrono::steady_clock::now();
        locost::text::byte_bpe_trainer trainer;
        for (const auto& f : files) trainer.add_text(locost::io::read_text_file(f));
        const auto vocab = trainer.train(options);
        vocab.write(out);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "train_bpe: %zu files, %zu distinct words, %zu pieces (%zu merges) in %.2f s -> %s\n", files.size(),
                     trainer.distinct_words(), vocab.pieces.size(), vocab.merges.size(), s, out.c_str());
        return 0;
    } catch (const locost::error& e) {
        std::fprintf(stderr, "train_bpe: %s\n", e.what());
        return e.id().rfind("cli.", 0) == 0 ? 2 : 1;
    }
}
