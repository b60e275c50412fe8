// Training a byte-level BPE vocabulary (vocab.json + merges.txt that byte_bpe_tokenizer and
// Hugging Face load), so that the project has a BPE vocabulary of its own for BART demo
// checkpoints: no pretrained vocabulary can be downloaded here.
//
// The standard algorithm, on the same pre-tokenization as encoding:
//  1. add_text() splits texts with the GPT-2 pattern (gpt2_pretokenizer.hpp) and counts the
//     words, as byte strings (ill-formed UTF-8 first becomes U+FFFD, as in encode()).
//  2. The vocabulary starts with the special tokens (BART's `<s>`, `<pad>`, `</s>`, `<unk>`,
//     `<mask>`: ids 0..4) and all 256 byte symbols in code-point order (ids 5..260), so that every
//     byte string can be encoded.
//  3. Repeatedly, the adjacent pair of symbols with the highest count over all words (each word
//     weighted by its count) becomes a new symbol, until the vocabulary has vocab_size entries or
//     no pair occurs min_frequency times. Ties go to the pair whose (left id, right id) is smallest,
//     the order Hugging Face's BpeTrainer uses, so the result is deterministic whatever the order of
//     the inputs and of the hash maps. A merge whose result already exists (from another pair) adds
//     a merge line but no new id, as HF's trainer does.
//
// Pair counts are kept incrementally: a merge touches only the words that contain the pair (an
// index from pair to words), and a max-heap holds the candidates lazily — an entry whose count has
// changed since it was pushed is re-pushed with the current count when it surfaces. Four books
// (7 MB, ~90K distinct words) train to 16000 entries in a few seconds.
//
// Error: tokenizer.bad_training (options: a special token repeated or equal to a byte symbol, a
// vocab_size below the specials + 256), io.write_failed (write()).
#pragma once
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "../core/utf8.hpp"
#include "../io/atomic_file.hpp"
#include "../io/json.hpp"
#include "byte_bpe_model.hpp"
#include "gpt2_pretokenizer.hpp"

namespace locost::text {

struct byte_bpe_training {
    std::size_t vocab_size = 16000;   // entries of vocab.json: special tokens + 256 bytes + merges
    std::uint64_t min_frequency = 2;  // a pair seen fewer times than this is never merged
    std::vector<std::string> special_tokens = {"<s>", "<pad>", "</s>", "<unk>", "<mask>"};  // ids 0.. (BART's)
};

// A trained vocabulary: pieces by id (as vocab.json spells them) and merges by rank.
struct byte_bpe_vocabulary {
    std::vector<std::string> pieces;
    std::vector<std::pair<std::string, std::string>> merges;

    // {"piece": id, ...} in id order, on one line.
    std::string vocab_json() const {
        nlohmann::ordered_json j = nlohmann::ordered_json::object();
        for (std::size_t id = 0; id < pieces.size(); ++id) j[pieces[id]] = id;
        return j.dump() + "\n";
    }
    // "#version: 0.2" (the header Hugging Face writes), then "left right" per line.
    std::string merges_txt() const {
        std::string out = "#version: 0.2\n";
        for (const auto& [a, b] : merges) out += a + " " + b + "\n";
        return out;
    }
    // DIR/vocab.json and DIR/merges.txt (DIR is created).
    void write(const std::string& dir) const {
        namespace fs = std::filesystem;
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (ec) throw error("io.write_failed", dir + ": cannot create directory (" + ec.message() + ")");
        for (const auto& [name, text] : {std::pair<const char*, std::string>{"vocab.json", vocab_json()}, {"merges.txt", merges_txt()}}) {
            io::write_file_atomically((fs::path(dir) / name).string(), text);
        }
    }
};

class byte_bpe_trainer {
public:
    // Counts the words of text (GPT-2 pre-tokenization, no added tokens, no prefix space).
    void add_text(std::string_view text) {
        std::string repaired;
        text = well_formed_utf8(text, repaired);
        const auto& pattern = detail::gpt2_pattern::get();
        const auto md = pattern.new_match_data();
        pattern.split(text, md.get(), [&](std::size_t b, std::size_t e) {
            const std::string_view w = text.substr(b, e - b);
            if (auto it = counts_.find(w); it != counts_.end()) ++it->second;
            else counts_.emplace(std::string(w), 1);
        });
    }

    std::size_t distinct_words() const noexcept { return counts_.size(); }

    byte_bpe_vocabulary train(const byte_bpe_training& options = {}) const {
        byte_bpe_vocabulary v;
        std::unordered_map<std::string, int> id_of;
        auto add_piece = [&](const std::string& p, const char* what) {
            if (!id_of.emplace(p, static_cast<int>(v.pieces.size())).second)
                throw error("tokenizer.bad_training", std::string(what) + " " + detail::quoted(p) + " is already in the vocabulary");
            v.pieces.push_back(p);
        };
        for (const auto& s : options.special_tokens) add_piece(s, "special token");
        std::vector<std::pair<char32_t, int>> bytes;  // the byte symbols in code-point order
        for (int b = 0; b < 256; ++b) bytes.emplace_back(detail::gpt2_bytes().char_of[static_cast<std::size_t>(b)], b);
        std::sort(bytes.begin(), bytes.end());
        std::array<int, 256> byte_id{};
        for (const auto& [cp, b] : bytes) {
            byte_id[static_cast<std::size_t>(b)] = static_cast<int>(v.pieces.size());
            add_piece(detail::byte_symbol(static_cast<unsigned char>(b)), "byte symbol");
        }
        if (options.vocab_size < v.pieces.size())
            throw error("tokenizer.bad_training",
                        "vocab_size " + std::to_string(options.vocab_size) + " is below the " + std::to_string(v.pieces.size()) +
                            " special tokens and byte symbols");

        // The words in byte order (so that nothing depends on the hash map's order), as symbols.
        std::vector<std::pair<std::string_view, std::uint64_t>> sorted(counts_.begin(), counts_.end());
        std::sort(sorted.begin(), sorted.end());
        std::vector<std::vector<int>> words(sorted.size());
        std::vector<std::int64_t> weight(sorted.size());
        for (std::size_t w = 0; w < sorted.size(); ++w) {
            for (unsigned char c : sorted[w].first) words[w].push_back(byte_id[c]);
            weight[w] = static_cast<std::int64_t>(sorted[w].second);
        }

        std::unordered_map<std::uint64_t, std::int64_t> count;                // pair → weighted count
        std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> where;  // pair → words that had it
        for (std::uint32_t w = 0; w < words.size(); ++w)
            for (std::size_t i = 0; i + 1 < words[w].size(); ++i) {
                const auto k = detail::pair_key(words[w][i], words[w][i + 1]);
                count[k] += weight[w];
                auto& list = where[k];
                if (list.empty() || list.back() != w) list.push_back(w);
            }
        std::vector<entry> heap;
        heap.reserve(count.size());
        for (const auto& [k, c] : count) heap.push_back({c, k});
        std::make_heap(heap.begin(), heap.end(), before);

        std::vector<std::uint32_t> seen(words.size(), 0);  // stamp: the merge that last visited a word
        std::unordered_set<std::uint64_t> created;
        std::vector<int> merged;
        std::uint32_t stamp = 0;
        while (v.pieces.size() < options.vocab_size && !heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), before);
            const entry top = heap.back();
            heap.pop_back();
            const std::int64_t now = count[top.pair];
            if (now != top.count) {  // stale: its words were merged since; try again with the count of now
                if (now > 0) {
                    heap.push_back({now, top.pair});
                    std::push_heap(heap.begin(), heap.end(), before);
                }
                continue;
            }
            if (top.count < static_cast<std::int64_t>(options.min_frequency)) break;
            const int a = static_cast<int>(top.pair >> 32), b = static_cast<int>(top.pair & 0xffffffffu);
            const std::string joined = v.pieces[static_cast<std::size_t>(a)] + v.pieces[static_cast<std::size_t>(b)];
            int id;
            if (const auto it = id_of.find(joined); it != id_of.end()) {
                id = it->second;
            } else {
                id = static_cast<int>(v.pieces.size());
                id_of.emplace(joined, id);
                v.pieces.push_back(joined);
            }
            v.merges.emplace_back(v.pieces[static_cast<std::size_t>(a)], v.pieces[static_cast<std::size_t>(b)]);

            ++stamp;
            created.clear();
            const std::vector<std::uint32_t> list = std::move(where[top.pair]);
            where.erase(top.pair);
            for (const std::uint32_t w : list) {
                if (seen[w] == stamp) continue;
                seen[w] = stamp;
                auto& s = words[w];
                // Merge left to right, non-overlapping; then move the word's pair counts from its old
                // pairs to its new ones.
                merged.clear();
                for (std::size_t i = 0; i < s.size(); ++i) {
                    if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                        merged.push_back(id);
                        ++i;
                    } else {
                        merged.push_back(s[i]);
                    }
                }
                if (merged.size() == s.size()) continue;  // the pair left this word in an earlier merge
                for (std::size_t i = 0; i + 1 < s.size(); ++i) count[detail::pair_key(s[i], s[i + 1])] -= weight[w];
                for (std::size_t i = 0; i + 1 < merged.size(); ++i) {
                    const auto k = detail::pair_key(merged[i], merged[i + 1]);
                    count[k] += weight[w];
                    if (merged[i] == id || merged[i + 1] == id) {
                        auto& l = where[k];
                        if (l.empty() || l.back() != w) l.push_back(w);
                        created.insert(k);
                    }
                }
                s.swap(merged);
            }
            for (const auto k : created) {
                heap.push_back({count[k], k});
                std::push_heap(heap.begin(), heap.end(), before);
            }
        }
        return v;
    }

private:
    struct entry {
        std::int64_t count;
        std::uint64_t pair;
    };
    // Heap order: the highest count first; among equal counts the smallest (left, right) pair.
    static bool before(const entry& x, const entry& y) noexcept { return x.count != y.count ? x.count < y.count : x.pair > y.pair; }

    std::unordered_map<std::string, std::uint64_t, detail::string_hash, std::equal_to<>> counts_;
};

}  // namespace locost::text
