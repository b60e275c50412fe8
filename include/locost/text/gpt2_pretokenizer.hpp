// GPT-2's pre-tokenization: the pattern that splits text into the words byte-level BPE merges
// within (step 4 of byte_bpe.hpp's encode()), for the tokenizer and its trainer alike.
//
// The pattern is `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
// PCRE2 runs it (UTF mode, JIT when the library has it), compiled once per process; std::regex
// has no \p{L}, \p{N} nor UTF-8. `\s` is written out as Hugging Face's Oniguruma reads it:
// U+0009..U+000D, U+0085 and the Z categories (= Unicode's White_Space), so that NBSP, U+2028 and
// NEL split as in HF; PCRE2's own \s differs (U+180E).
//
// The same object answers whether a character is a word character (Rust regex's \w), the test
// of single_word added tokens, so that one set of match data per call serves both.
//
// Threads: the compiled patterns are shared and read-only; each caller makes its own match data
// (new_match_data()), so there is no lock.
//
// <pcre2.h> needs PCRE2_CODE_UNIT_WIDTH; this header defines it as 8 when the includer has not (the
// usual choice) and calls the explicitly 8-bit functions, so it works whatever width was chosen.
#pragma once
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "../config/error.hpp"
#include "../core/utf8.hpp"

namespace locost::text {

namespace detail {

struct code_deleter {
    void operator()(pcre2_code_8* c) const noexcept { pcre2_code_free_8(c); }
};
struct match_data_deleter {
    void operator()(pcre2_match_data_8* m) const noexcept { pcre2_match_data_free_8(m); }
};
using pcre2_match_data_ptr = std::unique_ptr<pcre2_match_data_8, match_data_deleter>;

// The GPT-2 pre-tokenization pattern and the "word character" class of single_word added tokens,
// compiled once per process (function-local static: thread-safe initialisation), then read-only.
class gpt2_pattern {
public:
    static const gpt2_pattern& get() {
        static const gpt2_pattern p;
        return p;
    }

    pcre2_match_data_ptr new_match_data() const {
        pcre2_match_data_ptr m(pcre2_match_data_create_from_pattern_8(split_.get(), nullptr));
        if (!m) throw std::bad_alloc();
        return m;
    }

    // Calls word(begin, end) for the words of `text` (well-formed UTF-8), left to right. The
    // pattern's alternatives cover every character, so the words tile the text; should a gap
    // ever occur it is passed on as a word of its own, as HF's Isolated split keeps it.
    template <class Word>
    void split(std::string_view text, pcre2_match_data_8* md, Word&& word) const {
        const auto* s = reinterpret_cast<PCRE2_SPTR8>(text.data());
        const std::size_t n = text.size();
        std::size_t pos = 0;
        while (pos < n) {
            const int rc = match(split_.get(), s, n, pos, 0, md);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer_8(md);
            const std::size_t b = ov[0], e = ov[1];
            if (b > pos) word(pos, b);
            if (e == b) {  // cannot happen with this pattern (every alternative takes a character)
                pos = b + decode_utf8(reinterpret_cast<const unsigned char*>(text.data()) + b, n - b).len;
                word(b, pos);
                continue;
            }
            word(b, e);
            pos = e;
        }
        if (pos < n) word(pos, n);
    }

    // Whether the character starting at byte `at` of text is a word character (Rust regex's \w,
    // which HF's single_word check uses: letters, marks, decimal digits, connector punctuation,
    // ZWNJ/ZWJ).
    bool word_char_at(std::string_view text, std::size_t at, pcre2_match_data_8* md) const {
        const int rc = match(word_.get(), reinterpret_cast<PCRE2_SPTR8>(text.data()), text.size(), at, PCRE2_ANCHORED, md);
        return rc >= 0;
    }

    bool jit() const noexcept { return jit_; }

private:
    // `\s` of HF's Oniguruma: U+0009..U+000D, U+0085 and the separators (Z = Zs, Zl, Zp).
#define LOCOST_GPT2_SPACE "\\t-\\r\\x{85}\\p{Z}"
    static constexpr const char* split_pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" LOCOST_GPT2_SPACE "\\p{L}\\p{N}]+"
                                                 "|[" LOCOST_GPT2_SPACE "]+(?![^" LOCOST_GPT2_SPACE "])|[" LOCOST_GPT2_SPACE "]+";
#undef LOCOST_GPT2_SPACE
    static constexpr const char* word_pattern = "[\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";

    gpt2_pattern() {
        split_ = compile(split_pattern);
        word_ = compile(word_pattern);
        // JIT when this PCRE2 has it; the interpreter gives the same matches otherwise.
        jit_ = pcre2_jit_compile_8(split_.get(), PCRE2_JIT_COMPLETE) == 0;
        if (jit_) pcre2_jit_compile_8(word_.get(), PCRE2_JIT_COMPLETE);
    }

    static std::unique_ptr<pcre2_code_8, code_deleter> compile(const char* pattern) {
        int err = 0;
        PCRE2_SIZE at = 0;
        pcre2_code_8* c = pcre2_compile_8(reinterpret_cast<PCRE2_SPTR8>(pattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_NO_UTF_CHECK,
                                          &err, &at, nullptr);
        LOCOST_ASSERT(c != nullptr);  // constant patterns; PCRE2 without Unicode support would fail here
        return std::unique_ptr<pcre2_code_8, code_deleter>(c);
    }

    // The input was checked (or repaired) to be well-formed UTF-8, hence PCRE2_NO_UTF_CHECK. When
    // the JIT's stack is too small for an input, the interpreter (heap-based) takes over.
    int match(const pcre2_code_8* code, PCRE2_SPTR8 s, std::size_t n, std::size_t pos, std::uint32_t options,
              pcre2_match_data_8* md) const {
        int rc = pcre2_match_8(code, s, n, pos, options | PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match_8(code, s, n, pos, options | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR8 msg[256];
            pcre2_get_error_message_8(rc, msg, sizeof msg);
            throw error("tokenizer.encode_failed",
                        "the GPT-2 pre-tokenization pattern failed at byte " + std::to_string(pos) +
                            " of the input: " + reinterpret_cast<const char*>(msg));
        }
        return rc;
    }

    std::unique_ptr<pcre2_code_8, code_deleter> split_, word_;
    bool jit_ = false;
};

}  // namespace detail

}  // namespace locost::text
