// Tokenizing a whole book on one thread: byte-level BPE (text/byte_bpe.hpp with the repository's
// books-bpe vocabulary, 16000 entries) beside SentencePiece (books-16k.model, 16000 pieces), each
// with its family's conventions, as `locost summarize` tokenizes its input. The book is
// LOCOST_BENCH_BOOK, by default examples/data/war_and_peace.txt (3.2 MB).
// Counters: MB/s of text in, tokens/s out, tokens. Both tokenizers run on one thread (neither
// has threads of its own). BM_pretokenize is the byte-level BPE's pre-tokenization alone (the
// GPT-2 pattern through PCRE2, text/gpt2_pretokenizer.hpp), to show where its time goes.
// RESULTS.md has the command and the numbers.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <locost/text/tokenizer.hpp>
#include <string>

namespace {

void BM_tokenize(benchmark::State& s, const locost::text::tokenizer& tok, const std::string& text) {
    std::size_t tokens = 0;
    for (auto _ : s) {
        const auto ids = tok.encode(text);
        tokens = ids.size();
        benchmark::DoNotOptimize(ids.data());
    }
    s.counters["MB/s"] = benchmark::Counter(static_cast<double>(text.size()) * 1e-6, benchmark::Counter::kIsIterationInvariantRate);
    s.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
    s.counters["tokens"] = static_cast<double>(tokens);
}

void BM_pretokenize(benchmark::State& s, const std::string& text) {
    const auto& pattern = locost::text::detail::gpt2_pattern::get();
    const auto md = pattern.new_match_data();
    std::size_t words = 0;
    for (auto _ : s) {
        words = 0;
        pattern.split(text, md.get(), [&](std::size_t, std::size_t) { ++words; });
        benchmark::DoNotOptimize(words);
    }
    s.counters["MB/s"] = benchmark::Counter(static_cast<double>(text.size()) * 1e-6, benchmark::Counter::kIsIterationInvariantRate);
    s.counters["words"] = static_cast<double>(words);
    s.counters["jit"] = pattern.jit() ? 1 : 0;
}

int register_all() {
    const std::string data = LOCOST_EXAMPLES_DATA;
    const char* env = std::getenv("LOCOST_BENCH_BOOK");
    static const std::string text = locost::io::read_text_file(env ? env : data + "/war_and_peace.txt");
    static const locost::text::tokenizer bpe = locost::text::open_tokenizer(data + "/books-bpe");
    static const locost::text::tokenizer spm(data + "/books-16k.model");
    benchmark::RegisterBenchmark("BM_tokenize/byte_bpe", BM_tokenize, std::cref(bpe), std::cref(text))->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_tokenize/sentencepiece", BM_tokenize, std::cref(spm), std::cref(text))->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_pretokenize/gpt2_pattern", BM_pretokenize, std::cref(text))->Unit(benchmark::kMillisecond)->UseRealTime();
    return 0;
}
const int registered = register_all();

} // namespace

BENCHMARK_MAIN();
