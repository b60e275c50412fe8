// Byte-level BPE (text/byte_bpe.hpp) and its trainer: every case transformers 5.17's BartTokenizer
// gave (tests/data/hf/bpe), lossy decoding as Python's, added and special tokens as Hugging Face's
// tokenizers library splits them, malformed files with their exact errors, and a trained vocabulary.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <locost/locost.hpp>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"

namespace fs = std::filesystem;
using locost::text::byte_bpe_sources;
using locost::text::byte_bpe_tokenizer;

namespace {

const std::string bpe_dir = test::data_dir + "/hf/bpe";

using test::slurp;

void write_file(const fs::path& p, const std::string& text) {
    std::ofstream f(p, std::ios::binary);
    f << text;
}

// A scratch directory holding the reference vocab.json + merges.txt.
std::string bpe_copy(const std::string& name) {
    const std::string dir = test::scratch_dir(name);
    fs::copy_file(bpe_dir + "/vocab.json", dir + "/vocab.json");
    fs::copy_file(bpe_dir + "/merges.txt", dir + "/merges.txt");
    return dir;
}

// The id of the byte symbol of b in a tokenizer.
int byte_token(const byte_bpe_tokenizer& t, unsigned char b) { return t.id_of(locost::text::detail::byte_symbol(b)); }

}  // namespace

TEST_CASE("bpe: every case of transformers 5.17's BartTokenizer (ids, decoded, decoded with special tokens)") {
    const auto cases = nlohmann::json::parse(slurp(bpe_dir + "/cases.json"));
    REQUIRE(cases["tokenizer_class"] == "RobertaTokenizer");
    const auto tok = byte_bpe_tokenizer::open(bpe_dir);
    const auto handle = locost::text::open_tokenizer(bpe_dir);  // the same through the tokenizer handle
    CHECK(tok.vocab_size() == 2000);
    CHECK(handle.vocab_size() == 2000);
    CHECK(tok.merge_count() == 1739);
    const auto sp = handle.specials();
    CHECK(sp.bos == 0);
    CHECK(sp.pad == 1);
    CHECK(sp.eos == 2);
    CHECK(sp.unk == 3);
    CHECK(sp.mask == 4);
    std::size_t n = 0;
    for (const auto& c : cases["cases"]) {
        const std::string text = c["text"];
        CAPTURE(text);
        const auto ids = c["ids"].get<std::vector<int>>();
        CHECK(tok.encode(text) == ids);
        CHECK(handle.encode(text) == ids);
        CHECK(tok.decode(ids) == c["decoded"].get<std::string>());
        CHECK(handle.decode(ids) == c["decoded"].get<std::string>());
        CHECK(tok.decode(ids, 0, nullptr, /*keep_special=*/true) == c["decoded_with_special"].get<std::string>());
        ++n;
    }
    CHECK(n == 252);
}

TEST_CASE("bpe: open_tokenizer picks byte-level BPE for vocab.json + merges.txt, SentencePiece for spiece.model") {
    const std::string spm = (fs::path(test::data_dir).parent_path().parent_path() / "examples/data/books-16k.model").string();
    const std::string both = bpe_copy("bpe-both");
    fs::copy_file(spm, both + "/spiece.model");
    CHECK(locost::text::open_tokenizer(both).vocab_size() == 2000);  // BPE wins over a stray spiece.model
    CHECK(locost::text::open_tokenizer(both).path() == both);
    fs::remove(both + "/vocab.json");
    CHECK(locost::text::open_tokenizer(both).vocab_size() == 16000);  // SentencePiece without the pair
    fs::remove(both + "/spiece.model");
    test::check_error([&] { (void)locost::text::open_tokenizer(both); }, "tokenizer.not_found",
                      both + "/vocab.json: not found (a byte-level BPE tokenizer is vocab.json and merges.txt)");
    fs::remove(both + "/merges.txt");
    test::check_error(
        [&] { (void)locost::text::open_tokenizer(both); }, "tokenizer.not_found",
        both +
            ": no tokenizer (expected tokenizer.json, vocab.json + merges.txt, a byte-level BPE tokenizer, or spiece.model, a SentencePiece model)");
    test::check_error([&] { (void)byte_bpe_tokenizer::open(both); }, "tokenizer.not_found",
                      both + "/vocab.json: not found (a byte-level BPE tokenizer is vocab.json and merges.txt)");
    // The SentencePiece tokenizer's special ids through the same handle (T5: no BOS, no mask).
    const auto sp = locost::text::tokenizer(spm).specials();
    CHECK(sp.bos == -1);
    CHECK(sp.pad == 0);
    CHECK(sp.eos == 1);
    CHECK(sp.unk == 2);
    CHECK(sp.mask == -1);
}

TEST_CASE("sentencepiece: Pegasus's numbering (PegasusTokenizer: pieces from id 103, eos 1) from tokenizer_config.json or the family") {
    const std::string spm = (fs::path(test::data_dir).parent_path().parent_path() / "examples/data/books-16k.model").string();
    const std::string dir = test::scratch_dir("pegasus-tokenizer");
    fs::copy_file(spm, dir + "/spiece.model", fs::copy_options::overwrite_existing);
    const locost::text::sentencepiece_tokenizer t5(spm);
    const std::string text = "It is a truth universally acknowledged, \u00e6 \u2603 zzqx.";
    const auto plain = t5.encode(text);  // T5's numbering: pieces as they are, then </s> (1)
    REQUIRE(plain.size() > 4);
    auto expect_pegasus = [&](const locost::text::tokenizer& tok, int offset) {
        auto want = plain;
        want.pop_back();
        for (int& id : want) id += offset;  // PegasusTokenizer._convert_token_to_id: piece + offset
        want.push_back(1);                  // build_inputs_with_special_tokens: + [eos_token_id]
        CHECK(tok.encode(text) == want);
        CHECK(tok.vocab_size() == 16000 + offset);
        CHECK(tok.decode(want) == t5.decode(plain));
        // Ids below the offset are Pegasus's special tokens (pad, eos, masks, <unk_2>...): skipped.
        auto with_specials = want;
        with_specials.insert(with_specials.begin(), {0, 2, offset / 2, offset - 1});
        CHECK(tok.decode(with_specials) == t5.decode(plain));
        const auto s = tok.specials();
        CHECK(s.pad == 0);
        CHECK(s.eos == 1);
        CHECK(s.unk == 2 + offset);  // 105 for the default offset, as pegasus's unk_token_id
        CHECK(s.bos == -1);
    };
    // No tokenizer_config.json, no config.json: T5's numbering.
    CHECK(locost::text::open_tokenizer(dir).encode(text) == plain);
    CHECK(locost::models::open_tokenizer(dir).encode(text) == plain);
    // Without tokenizer_config.json the family config.json names settles it (models::open_tokenizer);
    // text/ alone reads no config.json.
    std::ofstream(dir + "/config.json") << R"({"model_type": "pegasus_x"})";
    expect_pegasus(locost::models::open_tokenizer(dir), 103);
    CHECK(locost::text::open_tokenizer(dir).encode(text) == plain);
    std::ofstream(dir + "/tokenizer_config.json") << R"({"tokenizer_class": "PegasusTokenizer", "offset": 7})";
    expect_pegasus(locost::text::open_tokenizer(dir), 7);
    std::ofstream(dir + "/tokenizer_config.json") << R"({"tokenizer_class": "PegasusTokenizerFast"})";
    expect_pegasus(locost::text::open_tokenizer(dir), 103);
    // tokenizer_config.json decides: a T5 tokenizer in a directory whose config.json says pegasus_x.
    std::ofstream(dir + "/tokenizer_config.json") << R"({"tokenizer_class": "T5Tokenizer"})";
    CHECK(locost::text::open_tokenizer(dir).encode(text) == plain);
    std::ofstream(dir + "/tokenizer_config.json") << R"({"tokenizer_class": "PegasusTokenizer", "offset": -3})";
    test::check_error([&] { (void)locost::text::open_tokenizer(dir); }, "tokenizer.bad_config",
                      dir + "/tokenizer_config.json: \"offset\" is -3, expected an integer in [1, 100000]");
    std::ofstream(dir + "/tokenizer_config.json") << "[1]";
    test::check_error([&] { (void)locost::text::open_tokenizer(dir); }, "tokenizer.bad_config",
                      dir + "/tokenizer_config.json: expected a JSON object, found a JSON array");
}

TEST_CASE("bpe: ill-formed UTF-8 decodes as Python's bytes.decode('utf-8', errors='replace') and encodes as its replacement") {
    const auto tok = byte_bpe_tokenizer::open(bpe_dir);
    // Each case: the bytes of byte-symbol tokens, and what python3 gave for
    // bytes(case).decode('utf-8', errors='replace') (one U+FFFD per maximal subpart).
    const std::string fffd = "\xef\xbf\xbd";
    const std::pair<std::string, std::string> cases[] = {
        {"\x80", fffd},  // a lone continuation byte
        {"a\x80"
         "b",
         "a" + fffd + "b"},
        {"\xe2\x82", fffd},  // a truncated 3-byte sequence: one U+FFFD
        {"\xe2\x82"
         "A",
         fffd + "A"},
        {"\xe2\x82\xac", "\xe2\x82\xac"},                 // the euro sign from three byte tokens
        {"\xf0\x80\x80\x80", fffd + fffd + fffd + fffd},  // overlong: F0 needs 90..BF next
        {"\xed\xa0\x80", fffd + fffd + fffd},             // a surrogate
        {"\xc0\xaf", fffd + fffd},                        // C0 never starts a sequence
        {"\xf4\x90\x80\x80", fffd + fffd + fffd + fffd},  // beyond U+10FFFF
        {"\xff\xfe", fffd + fffd},
        {"\xf0\x9f\x98", fffd},  // a truncated emoji
        {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
        {"\xe0\x80\x80", fffd + fffd + fffd},
        {"\xc3", fffd},
    };
    for (const auto& [bytes, python] : cases) {
        CAPTURE(bytes);
        std::vector<int> ids;
        for (unsigned char b : bytes) ids.push_back(byte_token(tok, b));
        CHECK(tok.decode(ids) == python);
        // encode() repairs its input the same way: ill-formed bytes are U+FFFD there too.
        CHECK(tok.encode(bytes) == tok.encode(python));
    }
    // A multi-byte character split across tokens and a special token between them.
    CHECK(tok.decode({byte_token(tok, 0xe2), 0, byte_token(tok, 0x82), byte_token(tok, 0xac)}) == "\xe2\x82\xac");
}

TEST_CASE("bpe: added and special tokens from tokenizer_config.json, added_tokens.json and special_tokens_map.json") {
    const std::string dir = bpe_copy("bpe-added");
    // As transformers saves a BART tokenizer with two added tokens, plus a third in added_tokens.json
    // made special by special_tokens_map.json.
    write_file(dir + "/tokenizer_config.json", R"({
  "add_prefix_space": false,
  "added_tokens_decoder": {
    "0": {"content": "<s>", "lstrip": false, "normalized": true, "rstrip": false, "single_word": false, "special": true},
    "1": {"content": "<pad>", "lstrip": false, "normalized": true, "rstrip": false, "single_word": false, "special": true},
    "2": {"content": "</s>", "lstrip": false, "normalized": true, "rstrip": false, "single_word": false, "special": true},
    "3": {"content": "<unk>", "lstrip": false, "normalized": true, "rstrip": false, "single_word": false, "special": true},
    "4": {"content": "<mask>", "lstrip": true, "normalized": true, "rstrip": false, "single_word": false, "special": true},
    "2000": {"content": "<sep2>", "lstrip": false, "normalized": false, "rstrip": true, "single_word": false, "special": true},
    "2001": {"content": "wordy", "lstrip": false, "normalized": true, "rstrip": false, "single_word": true, "special": false}
  },
  "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>", "pad_token": "<pad>", "cls_token": "<s>",
  "mask_token": {"__type": "AddedToken", "content": "<mask>", "lstrip": true, "normalized": true, "rstrip": false, "single_word": false, "special": true},
  "model_max_length": 1024,
  "tokenizer_class": "BartTokenizer"
})");
    write_file(dir + "/added_tokens.json", R"({"<sep2>": 2000, "wordy": 2001, "[extra]": 2002})");
    write_file(dir + "/special_tokens_map.json", R"({"additional_special_tokens": ["[extra]"]})");
    const auto tok = byte_bpe_tokenizer::open(dir);
    CHECK(tok.vocab_size() == 2003);
    CHECK(tok.is_special(2000));
    CHECK(!tok.is_special(2001));
    CHECK(tok.is_special(2002));
    // Expected: Hugging Face's tokenizers 0.23.2 (Node binding) with these added tokens, ByteLevel
    // pre-tokenizer and decoder, RobertaProcessing — the pipeline transformers builds for them.
    struct added_case {
        const char* text;
        std::vector<int> ids;
        const char* decoded;
    };
    const added_case cases[] = {
        {"Hello<sep2>   world", {0, 44, 406, 83, 2000, 91, 292, 318, 2}, "Helloworld"},  // rstrip takes the spaces
        {"wordy wordyx xwordy wordy.", {0, 2001, 854, 93, 92, 225, 92, 91, 562, 93, 225, 2001, 18, 2}, "wordy wordyx xwordy wordy."},
        {"a <mask> b<mask>c", {0, 69, 4, 277, 4, 71, 2}, "a bc"},  // lstrip takes the space before <mask>
        {"[extra]x y", {0, 2002, 92, 329, 2}, "x y"},
        {"<s>hi</s>", {0, 0, 76, 77, 2, 2}, "hi"},
        {"  <mask>", {0, 4, 2}, ""},
        {"", {0, 2}, ""},
        {"x<sep2>\n\ty", {0, 92, 2000, 93, 2}, "xy"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        CHECK(tok.encode(c.text) == c.ids);
        CHECK(tok.decode(c.ids) == c.decoded);
    }
    CHECK(tok.decode({2001, 2000, 2002}, 0, nullptr, true) == "wordy<sep2>[extra]");
    // Without the specials around (add_special false), as when a caller builds its own input.
    CHECK(tok.encode("wordy", false) == std::vector<int>{2001});
}

TEST_CASE("bpe: add_prefix_space from tokenizer_config.json") {
    const std::string dir = bpe_copy("bpe-prefix");
    write_file(dir + "/tokenizer_config.json", R"({"add_prefix_space": true})");
    const auto tok = byte_bpe_tokenizer::open(dir);
    CHECK(tok.add_prefix_space());
    // Expected: HF tokenizers 0.23.2 with ByteLevel(add_prefix_space=True): a space goes in front of
    // every piece between added tokens that does not start with one.
    CHECK(tok.encode("Hello world") == std::vector<int>{0, 407, 406, 83, 1100, 2});
    CHECK(tok.encode("a<mask>b") == std::vector<int>{0, 263, 4, 277, 2});
    CHECK(tok.encode(" already spaced") == std::vector<int>{0, 1968, 442, 1556, 2});
    CHECK(tok.encode("x<s>y") == std::vector<int>{0, 225, 92, 0, 329, 2});
    CHECK(tok.decode({0, 263, 4, 277, 2}) == " a b");
}

TEST_CASE("bpe: the model's extra ids are skipped and counted; ids beyond both vocabularies are an error") {
    const auto tok = locost::text::open_tokenizer(bpe_dir);
    const std::vector<int> words = tok.encode("Call me Ishmael.");
    std::vector<int> with_extra = words;
    with_extra.insert(with_extra.begin() + 2, 2003);
    with_extra.push_back(2047);
    int extra = -1;
    CHECK(tok.decode(with_extra, 2048, &extra) == "Call me Ishmael.");
    CHECK(extra == 2);
    test::check_error([&] { (void)tok.decode(with_extra); }, "tokenizer.bad_id",
                      bpe_dir + ": token id 2003 is outside the vocabulary [0, 2000)");
    test::check_error(
        [&] {
            (void)tok.decode({5, -1}, 2048);
        },
        "tokenizer.bad_id", bpe_dir + ": token id -1 is outside the vocabulary [0, 2048)");
}

TEST_CASE("bpe: malformed vocab.json, merges.txt and configuration files fail with exact errors") {
    const std::string vocab = R"({"<s>":0,"<pad>":1,"</s>":2,"<unk>":3,"<mask>":4,"a":5,"b":6,"c":7,"ab":8})";
    const std::string merges = "#version: 0.2\na b\n";
    auto load = [](const std::string& v, const std::string& m, std::optional<std::string> config = {},
                   std::optional<std::string> added = {}, std::optional<std::string> map = {}) {
        byte_bpe_sources s;
        s.dir = "mem";
        s.vocab_json = v;
        s.merges_txt = m;
        s.tokenizer_config_json = std::move(config);
        s.added_tokens_json = std::move(added);
        s.special_tokens_map_json = std::move(map);
        (void)byte_bpe_tokenizer(s);
    };
    CHECK_NOTHROW(load(vocab, merges));
    CHECK_NOTHROW(load(vocab, "#version: 0.2\r\na b"));  // CRLF and no final newline, as HF reads them

    struct bad {
        std::string text;
        const char* id;
        const char* message;
    };
    const bad vocabs[] = {
        {R"({"a": 0,)", "tokenizer.bad_vocab",
         "mem/vocab.json: invalid JSON at byte 8: syntax error while parsing object key - unexpected end of input; expected string literal"},
        {R"({1: 0})", "tokenizer.bad_vocab",  // JSON keys are strings
         "mem/vocab.json: invalid JSON at byte 1: syntax error while parsing object key - unexpected number literal; expected string literal"},
        {"[1, 2]", "tokenizer.bad_vocab", "mem/vocab.json: expected a JSON object mapping pieces to ids, found a JSON array"},
        {"{}", "tokenizer.bad_vocab", "mem/vocab.json: no pieces (an empty object)"},
        {R"({"a": "0"})", "tokenizer.bad_vocab", "mem/vocab.json: piece 'a' has a JSON string as its id, expected a non-negative integer"},
        {R"({"a": 1.5})", "tokenizer.bad_vocab", "mem/vocab.json: piece 'a' has a JSON number as its id, expected a non-negative integer"},
        {"{\"x\\ny\": null}", "tokenizer.bad_vocab",
         "mem/vocab.json: piece 'x\\x0ay' has a JSON null as its id, expected a non-negative integer"},
        {R"({"a": -1})", "tokenizer.bad_vocab",
         "mem/vocab.json: piece 'a' has id -1, outside [0, 1): the ids of the 1 pieces must be 0..0"},
        {R"({"a": 0, "b": 5})", "tokenizer.bad_vocab",
         "mem/vocab.json: piece 'b' has id 5, outside [0, 2): the ids of the 2 pieces must be 0..1"},
        {R"({"a": 0, "b": 0})", "tokenizer.bad_vocab", "mem/vocab.json: id 0 is given to both 'a' and 'b'"},
        {R"({"a": 0, "a": 1})", "tokenizer.bad_vocab", "mem/vocab.json: key 'a' appears more than once in the same JSON object"},
    };
    for (const auto& b : vocabs) {
        CAPTURE(b.text);
        test::check_error([&] { load(b.text, merges); }, b.id, b.message);
    }
    const bad merge_files[] = {
        {"", "tokenizer.bad_merges", "mem/merges.txt: empty; expected a '#version' header line, then one merge 'a b' per line"},
        {"a b\n", "tokenizer.bad_merges",
         "mem/merges.txt: line 1 is 'a b', expected the '#version' header (without it Hugging Face's readers disagree on the first merge)"},
        {"#version: 0.2\na b c\n", "tokenizer.bad_merges", "mem/merges.txt: line 2 is 'a b c', expected two pieces separated by one space"},
        {"#version: 0.2\nab\n", "tokenizer.bad_merges", "mem/merges.txt: line 2 is 'ab', expected two pieces separated by one space"},
        {"#version: 0.2\n\na b\n", "tokenizer.bad_merges", "mem/merges.txt: line 2 is '', expected two pieces separated by one space"},
        {"#version: 0.2\na  b\n", "tokenizer.bad_merges", "mem/merges.txt: line 2 is 'a  b', expected two pieces separated by one space"},
        {"#version: 0.2\na x\n", "tokenizer.bad_merges", "mem/merges.txt: line 2: 'x' is not in vocab.json"},
        {"#version: 0.2\nb c\n", "tokenizer.bad_merges",
         "mem/merges.txt: line 2: merging 'b' and 'c' gives 'bc', which is not in vocab.json"},
        {"#version: 0.2\na b\r\na b\r\n", "tokenizer.bad_merges", "mem/merges.txt: line 3 repeats the merge 'a b' of line 2"},
    };
    for (const auto& b : merge_files) {
        CAPTURE(b.text);
        test::check_error([&] { load(vocab, b.text); }, b.id, b.message);
    }
    const bad configs[] = {
        {"{", "tokenizer.bad_config",
         "mem/tokenizer_config.json: invalid JSON at byte 1: syntax error while parsing object key - unexpected end of input; expected string literal"},
        {"[]", "tokenizer.bad_config", "mem/tokenizer_config.json: expected a JSON object, found a JSON array"},
        {R"({"add_prefix_space": "yes"})", "tokenizer.bad_config",
         "mem/tokenizer_config.json: \"add_prefix_space\" is a JSON string, expected true or false"},
        {R"({"bos_token": 5})", "tokenizer.bad_config",
         "mem/tokenizer_config.json: \"bos_token\" is a JSON integer, expected a string or an object with \"content\""},
        {R"({"mask_token": {"lstrip": true}})", "tokenizer.bad_config",
         "mem/tokenizer_config.json: \"mask_token\" has no string \"content\""},
        {R"({"mask_token": {"content": "<mask>", "lstrip": 1}})", "tokenizer.bad_config",
         "mem/tokenizer_config.json: \"mask_token\": \"lstrip\" is a JSON integer, expected true or false"},
        {R"({"additional_special_tokens": "<z>"})", "tokenizer.bad_config",
         "mem/tokenizer_config.json: \"additional_special_tokens\" is a JSON string, expected an array of tokens"},
        {R"({"added_tokens_decoder": {"x": {"content": "<z>"}}})", "tokenizer.bad_config",
         "mem/tokenizer_config.json: added_tokens_decoder['x']: the key is not a token id (a non-negative integer)"},
        {R"({"added_tokens_decoder": {"9": "<z>"}})", "tokenizer.bad_config",
         "mem/tokenizer_config.json: added_tokens_decoder['9'] is a JSON string, expected an object"},
        {R"({"added_tokens_decoder": {"6": {"content": "<z>"}}})", "tokenizer.bad_config",
         "mem/tokenizer_config.json: added_tokens_decoder['6'] gives id 6 to '<z>', which is 'b' in vocab.json"},
        {R"({"added_tokens_decoder": {"9": {"content": "ab"}}})", "tokenizer.bad_config",
         "mem/tokenizer_config.json: added_tokens_decoder['9'] gives id 9 to 'ab', which vocab.json gives id 8"},
        {R"({"added_tokens_decoder": {"10": {"content": "<z>"}}})", "tokenizer.bad_config",
         "mem/tokenizer_config.json: added_tokens_decoder['10'] gives id 10 to '<z>', leaving id 9 without a token (vocab.json has ids 0..8; "
         "added ids must follow them without a gap)"},
    };
    for (const auto& b : configs) {
        CAPTURE(b.text);
        test::check_error([&] { load(vocab, merges, b.text); }, b.id, b.message);
    }
    const std::string decoder_z = R"({"added_tokens_decoder": {"9": {"content": "<z>"}}})";
    const bad added[] = {
        {R"({"<z>": "9"})", "tokenizer.bad_config",
         "mem/added_tokens.json: entry '<z>' has \"9\" as its id, expected a non-negative integer"},
        {R"({"<z>": 11})", "tokenizer.bad_config",
         "mem/added_tokens.json: entry '<z>' gives id 11 to '<z>', which mem/tokenizer_config.json gives id 9"},
        {R"({"<y>": 9})", "tokenizer.bad_config",
         "mem/added_tokens.json: entry '<y>' gives id 9 to '<y>', which mem/tokenizer_config.json gives to '<z>'"},
    };
    for (const auto& b : added) {
        CAPTURE(b.text);
        test::check_error([&] { load(vocab, merges, decoder_z, b.text); }, b.id, b.message);
    }
    test::check_error([&] { load(vocab, merges, {}, {}, "[]"); }, "tokenizer.bad_config",
                      "mem/special_tokens_map.json: expected a JSON object, found a JSON array");
    CHECK_NOTHROW(load(vocab, merges, decoder_z, R"({"<z>": 9})"));  // the same token in both files

    // Files: a missing merges.txt, and a file's own path in its messages.
    const std::string dir = test::scratch_dir("bpe-files");
    write_file(dir + "/vocab.json", vocab);
    test::check_error([&] { (void)byte_bpe_tokenizer::open(dir); }, "tokenizer.not_found",
                      dir + "/merges.txt: not found (a byte-level BPE tokenizer is vocab.json and merges.txt)");
    write_file(dir + "/merges.txt", "#version: 0.2\na q\n");
    test::check_error([&] { (void)byte_bpe_tokenizer::open(dir); }, "tokenizer.bad_merges",
                      dir + "/merges.txt: line 2: 'q' is not in vocab.json");
}

TEST_CASE("bpe: special tokens missing from vocab.json are appended; a special token from special_tokens_map.json wins") {
    const std::string vocab = R"({"a":0,"b":1,"ab":2})";
    byte_bpe_sources s;
    s.dir = "mem";
    s.vocab_json = vocab;
    s.merges_txt = "#version: 0.2\na b\n";
    s.special_tokens_map_json = R"({"mask_token": "<m2>"})";
    const byte_bpe_tokenizer tok(s);
    // transformers adds BART's special tokens that the vocabulary lacks after it, in the order
    // bos, eos, unk, (sep = eos), pad, (cls = bos), mask.
    CHECK(tok.vocab_size() == 8);
    CHECK(tok.piece(3) == "<s>");
    CHECK(tok.piece(4) == "</s>");
    CHECK(tok.piece(5) == "<unk>");
    CHECK(tok.piece(6) == "<pad>");
    CHECK(tok.piece(7) == "<m2>");
    CHECK(tok.specials().mask == 7);
    CHECK(tok.encode("ab<m2>") == std::vector<int>{3, 2, 7, 4});
    CHECK(tok.decode({3, 2, 7, 4}) == "ab");
}

TEST_CASE("bpe: encode is thread-safe and takes long runs of one kind of character") {
    const auto tok = byte_bpe_tokenizer::open(bpe_dir);
    const std::string book =
        slurp(fs::path(test::data_dir).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 200000);
    const auto expected = tok.encode(book);
    CHECK(tok.decode(expected) == book);
    std::vector<std::vector<int>> got(4);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = tok.encode(book); });
    for (auto& t : threads) t.join();
    for (const auto& g : got) CHECK(g == expected);
    // Long runs: whitespace (the pattern's \s+(?!\S) backtracks over it), one letter, one digit.
    for (const std::string& run :
         {std::string(100000, ' ') + "x", std::string(100000, 'a'), std::string(100000, '7'), std::string(50000, '\n')}) {
        const auto ids = tok.encode(run);
        CHECK(tok.decode(ids) == run);
    }
}

TEST_CASE("bpe trainer: deterministic whatever the order of its inputs; its vocabulary loads and round-trips text") {
    const std::string text =
        slurp(fs::path(test::data_dir).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 120000);
    const std::string a = text.substr(0, 60000), b = text.substr(60000);
    locost::text::byte_bpe_training options;
    options.vocab_size = 600;
    locost::text::byte_bpe_trainer t1, t2;
    t1.add_text(a);
    t1.add_text(b);
    t2.add_text(b);
    t2.add_text(a);
    const auto v1 = t1.train(options), v2 = t2.train(options);
    CHECK(v1.vocab_json() == v2.vocab_json());
    CHECK(v1.merges_txt() == v2.merges_txt());
    REQUIRE(v1.pieces.size() == 600);
    CHECK(v1.merges.size() == 600 - 5 - 256);
    CHECK(v1.pieces[0] == "<s>");
    CHECK(v1.pieces[4] == "<mask>");
    CHECK(v1.pieces[5] == "!");    // the byte symbols in code-point order
    CHECK(v1.pieces[260] == "Ń");  // U+0143: the last of the 68 remapped bytes (0xAD, the soft hyphen)
    // The first merge is the most frequent adjacent byte pair within the words, counted here directly.
    std::map<std::pair<unsigned char, unsigned char>, int> pairs;
    const auto& pattern = locost::text::detail::gpt2_pattern::get();
    const auto md = pattern.new_match_data();
    pattern.split(text, md.get(), [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i + 1 < e; ++i) ++pairs[{static_cast<unsigned char>(text[i]), static_cast<unsigned char>(text[i + 1])}];
    });
    const auto top = std::max_element(pairs.begin(), pairs.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
    CHECK(v1.merges[0] ==
          std::make_pair(locost::text::detail::byte_symbol(top->first.first), locost::text::detail::byte_symbol(top->first.second)));

    const std::string dir = test::scratch_dir("bpe-trained");
    v1.write(dir);
    const auto tok = locost::text::open_tokenizer(dir);
    CHECK(tok.vocab_size() == 600);
    for (const std::string& s :
         {text.substr(0, 5000), std::string("Ünïcödé — “quotes” 😀 and\ttabs\r\n  "), std::string("\x80\xff bytes")}) {
        const auto ids = tok.encode(s);
        CHECK(ids.front() == 0);
        CHECK(ids.back() == 2);
        CHECK(tok.decode(ids) == locost::text::detail::replace_invalid_utf8(s));
    }
    // Merges make text shorter than its bytes.
    CHECK(tok.encode(text).size() < text.size() / 2);
    test::check_error(
        [&] {
            (void)t1.train({200, 2, {"<s>"}});
        },
        "tokenizer.bad_training", "vocab_size 200 is below the 257 special tokens and byte symbols");
    test::check_error(
        [&] {
            (void)t1.train({1000, 2, {"<s>", "a"}});
        },
        "tokenizer.bad_training", "byte symbol 'a' is already in the vocabulary");
}

TEST_CASE("bpe: the repository's books-bpe vocabulary (BART demo checkpoints) loads with BART's special ids") {
    const std::string dir = (fs::path(test::data_dir).parent_path().parent_path() / "examples/data/books-bpe").string();
    const auto tok = byte_bpe_tokenizer::open(dir);
    CHECK(tok.vocab_size() == 16000);
    CHECK(tok.merge_count() == 15739);
    const auto sp = tok.specials();
    CHECK(sp.bos == 0);
    CHECK(sp.pad == 1);
    CHECK(sp.eos == 2);
    CHECK(sp.unk == 3);
    CHECK(sp.mask == 4);
    for (int b = 0; b < 256; ++b) CHECK(byte_token(tok, static_cast<unsigned char>(b)) >= 5);
    const std::string text =
        "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.";
    const auto ids = tok.encode(text);
    CHECK(ids.size() < 32);
    CHECK(tok.decode(ids) == text);
}
