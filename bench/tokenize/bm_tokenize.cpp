// Tokenizing a whole book on one thread: byte-level BPE (text/byte_bpe.hpp with the repository's
// books-bpe vocabulary, 16000 entries) beside SentencePiece (books-16k.model, 16000 pieces), each
// with its family's conventions, as `locost summarize` tokenizes its input. The book is
// LOCOST_BENCH_BOOK, by default examples/data/war_and_peace.txt (3.2 MB).
// Counters: MB/s of text in, tokens/s out, tokens. Both tokenizers run on one thread (neither
// has threads of its own). BM_pretokenize is the byte-level BPE's pre-tokenization alone (the
// GPT-2 pattern through PCRE2, text/gpt2_pretokenizer.hpp), to show where its time goes.
// BM_tokenize/byte_bpe_added_100k is the same BPE carrying 10^5 added tokens (`<tok_00000>` ...,
// as some tokenizers' added_tokens.json has), over the book's first 1.3 MB with one of them after
// every line: the matching of added tokens (text/added_tokens.hpp) must not grow with their number.
// BM_tokenize/tokenizer_json_t5 and _pegasus are the same SentencePiece model written as
// transformers' converters write tokenizer.json (tests/data/tokenizer_json: Precompiled + Replace
// normalizer, Metaspace, Unigram), run by text/tokenizer_json.hpp as Hugging Face's tokenizers runs
// it; bench/tokenize/tokenize_hf.mjs times the Rust library itself (npm `tokenizers`) on the same files.
// RESULTS.md has the command and the numbers.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <locost/text/tokenizer.hpp>
#include <string>
#include <utility>

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

// The books BPE with `count` added tokens `<tok_NNNNN>` (added_tokens.json, ids after vocab.json's),
// and about `bytes` of `book` (whole lines) with one of those tokens after each line.
std::pair<locost::text::tokenizer, std::string> with_added_tokens(const std::string& dir, const std::string& book, int count,
                                                                  std::size_t bytes) {
    locost::text::byte_bpe_sources src;
    src.dir = dir;
    src.vocab_json = locost::io::read_text_file(dir + "/vocab.json", locost::io::vocabulary_file_limit);
    src.merges_txt = locost::io::read_text_file(dir + "/merges.txt", locost::io::vocabulary_file_limit);
    const int base = locost::text::byte_bpe_model(src).size();
    auto name = [](int i) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "<tok_%05d>", i);
        return std::string(buf);
    };
    std::string json = "{";
    for (int i = 0; i < count; ++i) json += (i ? ",\"" : "\"") + name(i) + "\":" + std::to_string(base + i);
    src.added_tokens_json = json + "}";
    std::string text;
    for (std::size_t at = 0, line = 0; at < book.size() && text.size() < bytes; ++line) {
        const std::size_t end = std::min(book.find('\n', at), book.size() - 1) + 1;
        text.append(book, at, end - at);
        text += name(static_cast<int>(line * 7919 % static_cast<std::size_t>(count)));
        at = end;
    }
    return {locost::text::tokenizer(locost::text::byte_bpe_tokenizer(src)), std::move(text)};
}

int register_all() {
    const std::string data = LOCOST_EXAMPLES_DATA;
    const char* env = std::getenv("LOCOST_BENCH_BOOK");
    static const std::string text = locost::io::read_text_file(env ? env : data + "/war_and_peace.txt");
    static const locost::text::tokenizer bpe = locost::text::open_tokenizer(data + "/books-bpe");
    static const locost::text::tokenizer spm(data + "/books-16k.model");
    benchmark::RegisterBenchmark("BM_tokenize/byte_bpe", BM_tokenize, std::cref(bpe), std::cref(text))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_tokenize/sentencepiece", BM_tokenize, std::cref(spm), std::cref(text))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    static const locost::text::tokenizer t5_json = locost::text::open_tokenizer_json(data + "/../../tests/data/tokenizer_json/t5_v4");
    static const locost::text::tokenizer pegasus_json =
        locost::text::open_tokenizer_json(data + "/../../tests/data/tokenizer_json/pegasus");
    benchmark::RegisterBenchmark("BM_tokenize/tokenizer_json_t5", BM_tokenize, std::cref(t5_json), std::cref(text))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_tokenize/tokenizer_json_pegasus", BM_tokenize, std::cref(pegasus_json), std::cref(text))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    static const auto added = with_added_tokens(data + "/books-bpe", text, 100000, 1300000);
    benchmark::RegisterBenchmark("BM_tokenize/byte_bpe_added_100k", BM_tokenize, std::cref(added.first), std::cref(added.second))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_pretokenize/gpt2_pattern", BM_pretokenize, std::cref(text))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
