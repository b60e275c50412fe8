// The byte-level BPE model of GPT-2, RoBERTa, BART and LED: GPT-2's byte alphabet, the
// vocabulary (vocab.json), the ranked merges (merges.txt) and the merge loop that turns one
// pre-tokenized word into ids, as Hugging Face's `tokenizers` BPE model does (step 5 of
// byte_bpe.hpp's encode()). The trainer (byte_bpe_trainer.hpp) writes what this reads.
//
//  * Each word's bytes map to GPT-2's byte symbols (bytes 33..126, 161..172, 174..255 are the
//    characters of the same number, the other 68 bytes are U+0100 + n in byte order), and merges
//    apply by rank: always the lowest-ranked adjacent pair, leftmost first (HF's priority queue).
//    A byte whose symbol is not in vocab.json is dropped, as HF's converted tokenizer (no unk
//    token in its BPE model) drops it; vocabularies trained byte-level have all 256.
//  * The model is read-only once built; the merge loop's scratch is the caller's (one per
//    encode() call), so that any number of threads encode at once.
//
// Errors (locost::error; each message names the file and the line or key):
//   tokenizer.bad_vocab   vocab.json: invalid JSON, not an object, an id that is not a
//                         non-negative integer, two pieces with one id, ids not numbering 0..n-1
//   tokenizer.bad_merges  merges.txt: no '#version' header (HF's readers either skip it or drop the
//                         first line unseen, so a headerless file loses a merge in one of them), a
//                         line that is not two pieces separated by one space, a piece or a merge
//                         result not in vocab.json (HF's BPE builder refuses both as
//                         MergeTokenOutOfVocabulary), a merge given twice (HF keeps the later rank)
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../config/error.hpp"
#include "../core/utf8.hpp"
#include "../io/json.hpp"

namespace locost::text {

namespace detail {

// A piece or text for a message: control characters as \xNN, at most 60 bytes of it.
inline std::string quoted(std::string_view s) {
    std::string out = "'";
    for (std::size_t i = 0; i < s.size() && i < 60; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    if (s.size() > 60) out += "...";
    return out + "'";
}

// ---- GPT-2's byte alphabet ---------------------------------------------------------------------

// Every byte gets a printable character so that BPE pieces are strings: bytes 33..126 ('!'..'~'),
// 161..172 and 174..255 keep their own code point; the other 68 bytes (controls, space, DEL,
// NBSP, soft hyphen ...) become U+0100 + n, n counting them in byte order (space → U+0120 'Ġ').
struct byte_alphabet {
    std::array<char32_t, 256> char_of{};      // byte → code point
    std::array<std::int16_t, 324> byte_of{};  // code point → byte, -1 when none maps there
};

inline const byte_alphabet& gpt2_bytes() {
    static const byte_alphabet table = [] {
        byte_alphabet t;
        t.byte_of.fill(-1);
        char32_t next = 256;
        for (unsigned b = 0; b < 256; ++b) {
            const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            t.char_of[b] = self ? b : next++;
            t.byte_of[t.char_of[b]] = static_cast<std::int16_t>(b);
        }
        return t;
    }();
    return table;
}

// The byte symbol of b as UTF-8 (how it is spelled in vocab.json and merges.txt).
inline std::string byte_symbol(unsigned char b) {
    std::string s;
    append_utf8(s, gpt2_bytes().char_of[b]);
    return s;
}

// ---- the merge table, the trainer's pair counts and the word cache ----------------------------

// A pair of adjacent symbols (left id, right id) as one hash key.
inline std::uint64_t pair_key(int a, int b) noexcept {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

// Transparent hashing: a word or piece as a string_view finds its std::string key without a copy.
struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

}  // namespace detail

// The files of a byte-level BPE tokenizer as texts, for loading from memory. `dir` only names
// them in messages ("<dir>/vocab.json").
struct byte_bpe_sources {
    std::string dir;
    std::string vocab_json;
    std::string merges_txt;
    std::optional<std::string> tokenizer_config_json;
    std::optional<std::string> special_tokens_map_json;
    std::optional<std::string> added_tokens_json;
    // What messages call the vocabulary, the merges and the added tokens' configuration: the
    // files DIR/vocab.json, DIR/merges.txt, DIR/tokenizer_config.json (the default, empty), or
    // the parts of a tokenizer.json they were taken from.
    std::string vocab_name, merges_name, config_name;
    std::string vocab_file() const { return vocab_name.empty() ? dir + "/vocab.json" : vocab_name; }
    std::string merges_file() const { return merges_name.empty() ? dir + "/merges.txt" : merges_name; }
    std::string config_file() const { return config_name.empty() ? dir + "/tokenizer_config.json" : config_name; }
};

// vocab.json and merges.txt, and the merge loop over them.
class byte_bpe_model {
public:
    // Scratch of the merge loop: the symbols of a word (a linked list) and the candidate merges.
    struct symbol {
        int id, prev, next;
    };
    struct candidate {
        std::int32_t rank, pos, left, right;
    };
    struct merge_scratch {
        std::vector<symbol> symbols;
        std::vector<candidate> heap;
    };

    // Reads src.vocab_json and src.merges_txt (the other files are the added tokens').
    explicit byte_bpe_model(const byte_bpe_sources& src) {
        read_vocab(src);
        read_merges(src);
    }

    // Pieces in vocab.json.
    int size() const noexcept { return static_cast<int>(pieces_.size()); }
    // The piece of an id as vocab.json spells it (byte symbols).
    const std::string& piece(int id) const { return pieces_.at(static_cast<std::size_t>(id)); }
    // The id of a piece, or -1.
    int id_of(std::string_view piece) const {
        const auto it = ids_.find(piece);
        return it == ids_.end() ? -1 : it->second;
    }
    std::size_t merge_count() const noexcept { return merges_.size(); }

    // BPE of one word's bytes, its ids appended to `ids`. The symbols form a linked list; a
    // min-heap of (rank, position) holds the candidate merges, entries whose pair has changed
    // since are skipped when they surface: always the lowest-ranked pair present, leftmost among
    // equals.
    void merge_word(std::string_view word, merge_scratch& scratch, std::vector<int>& ids) const {
        auto& sym = scratch.symbols;
        sym.clear();
        for (unsigned char b : word) {
            const int id = byte_id_[b];
            if (id < 0) continue;  // no symbol for this byte in vocab.json: dropped, as HF does
            const int i = static_cast<int>(sym.size());
            sym.push_back({id, i - 1, i + 1});
        }
        if (sym.empty()) return;
        sym.back().next = -1;
        auto& heap = scratch.heap;
        heap.clear();
        const auto later = [](const candidate& x, const candidate& y) { return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos; };
        const auto push = [&](int pos) {
            if (pos < 0) return;
            const int next = sym[static_cast<std::size_t>(pos)].next;
            if (next < 0) return;
            const int a = sym[static_cast<std::size_t>(pos)].id, b = sym[static_cast<std::size_t>(next)].id;
            const auto it = merges_.find(detail::pair_key(a, b));
            if (it == merges_.end()) return;
            heap.push_back({it->second.rank, pos, a, b});
            std::push_heap(heap.begin(), heap.end(), later);
        };
        for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) push(i);
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), later);
            const candidate c = heap.back();
            heap.pop_back();
            symbol& left = sym[static_cast<std::size_t>(c.pos)];
            if (left.id != c.left || left.next < 0) continue;  // merged away or changed since
            symbol& right = sym[static_cast<std::size_t>(left.next)];
            if (right.id != c.right) continue;
            left.id = merges_.find(detail::pair_key(c.left, c.right))->second.id;
            right.id = -1;  // gone
            left.next = right.next;
            if (left.next >= 0) sym[static_cast<std::size_t>(left.next)].prev = c.pos;
            push(left.prev);
            push(c.pos);
        }
        for (int i = 0; i >= 0; i = sym[static_cast<std::size_t>(i)].next) ids.push_back(sym[static_cast<std::size_t>(i)].id);
    }

private:
    struct merge_rule {
        std::int32_t rank;
        std::int32_t id;
    };

    void read_vocab(const byte_bpe_sources& src) {
        const std::string file = src.vocab_file();
        io::json j;
        try {
            j = io::parse_json(src.vocab_json, file, "tokenizer");
        } catch (const error& e) { throw error("tokenizer.bad_vocab", e.message()); }
        if (!j.is_object())
            throw error("tokenizer.bad_vocab",
                        file + ": expected a JSON object mapping pieces to ids, found a JSON " + io::json_type_name(j));
        if (j.empty()) throw error("tokenizer.bad_vocab", file + ": no pieces (an empty object)");
        const std::size_t n = j.size();
        pieces_.assign(n, {});
        std::vector<bool> seen(n, false);
        for (const auto& [piece, v] : j.items()) {
            const std::string at = file + ": piece " + detail::quoted(piece);
            if (!v.is_number_integer())
                throw error("tokenizer.bad_vocab",
                            at + " has a JSON " + io::json_type_name(v) + " as its id, expected a non-negative integer");
            const bool negative = v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0;
            if (negative || v.get<std::uint64_t>() >= n)
                throw error("tokenizer.bad_vocab",
                            at + " has id " + v.dump() + ", outside [0, " + std::to_string(n) + "): the ids of the " + std::to_string(n) +
                                " pieces must be 0.." + std::to_string(n - 1));
            const auto id = v.get<std::size_t>();
            if (seen[id])
                throw error("tokenizer.bad_vocab",
                            file + ": id " + std::to_string(id) + " is given to both " + detail::quoted(pieces_[id]) + " and " +
                                detail::quoted(piece));
            seen[id] = true;
            pieces_[id] = piece;
            ids_.emplace(piece, static_cast<int>(id));
        }
        for (unsigned b = 0; b < 256; ++b) byte_id_[b] = id_of(detail::byte_symbol(static_cast<unsigned char>(b)));
    }

    void read_merges(const byte_bpe_sources& src) {
        const std::string file = src.merges_file();
        std::string_view text = src.merges_txt;
        std::vector<std::string_view> lines;
        while (!text.empty()) {  // "a\nb\n" is two lines, as Rust's lines() reads it; "\r\n" ends one too
            const std::size_t e = text.find('\n');
            std::string_view line = text.substr(0, e);
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            lines.push_back(line);
            if (e == std::string_view::npos) break;
            text.remove_prefix(e + 1);
        }
        if (lines.empty())
            throw error("tokenizer.bad_merges", file + ": empty; expected a '#version' header line, then one merge 'a b' per line");
        if (lines[0].rfind("#version", 0) != 0)
            throw error("tokenizer.bad_merges",
                        file + ": line 1 is " + detail::quoted(lines[0]) +
                            ", expected the '#version' header (without it Hugging Face's readers disagree on the first merge)");
        std::unordered_map<std::uint64_t, std::size_t> line_of;  // pair → its line, for repeats
        std::int32_t rank = 0;
        for (std::size_t i = 1; i < lines.size(); ++i) {
            const std::string_view line = lines[i];
            if (line.rfind("#version", 0) == 0) continue;  // HF skips any such line
            const std::string at = file + ": line " + std::to_string(i + 1);
            const std::size_t sp = line.find(' ');
            if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string_view::npos)
                throw error("tokenizer.bad_merges", at + " is " + detail::quoted(line) + ", expected two pieces separated by one space");
            const std::string_view a = line.substr(0, sp), b = line.substr(sp + 1);
            const int ia = id_of(a), ib = id_of(b);
            if (ia < 0 || ib < 0) throw error("tokenizer.bad_merges", at + ": " + detail::quoted(ia < 0 ? a : b) + " is not in vocab.json");
            const std::string joined = std::string(a) + std::string(b);
            const int ij = id_of(joined);
            if (ij < 0)
                throw error("tokenizer.bad_merges",
                            at + ": merging " + detail::quoted(a) + " and " + detail::quoted(b) + " gives " + detail::quoted(joined) +
                                ", which is not in vocab.json");
            const auto key = detail::pair_key(ia, ib);
            if (const auto seen = line_of.find(key); seen != line_of.end())
                throw error("tokenizer.bad_merges",
                            at + " repeats the merge " + detail::quoted(line) + " of line " + std::to_string(seen->second + 1));
            line_of.emplace(key, i);
            merges_.emplace(key, merge_rule{rank++, ij});
        }
    }

    std::vector<std::string> pieces_;  // id → piece
    std::unordered_map<std::string, int, detail::string_hash, std::equal_to<>> ids_;
    std::array<int, 256> byte_id_{};  // byte → id of its byte symbol, -1 when vocab.json lacks it
    std::unordered_map<std::uint64_t, merge_rule> merges_;
};

}  // namespace locost::text
