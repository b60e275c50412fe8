// A byte-level Aho–Corasick automaton (Aho & Corasick, "Efficient string matching", 1975): the
// trie of a set of patterns with a failure link per state, so that one pass over a text finds
// every occurrence of every pattern in time linear in the text plus the occurrences reported —
// where walking the trie from every position costs the text's length times the longest pattern
// prefix found (an added token of 100K bytes against 100K bytes of its prefix: 18 s).
//
//   state s = the longest suffix of the text read so far that is a prefix of some pattern
//   step(s, c)        the state after reading byte c (failure links followed: amortized O(1))
//   each_match(s, f)  f(pattern, length) for every pattern that ends here, longest first: the
//                     state's own pattern, then down the dictionary links (the nearest proper
//                     suffix states that end a pattern)
//
// Patterns are numbered by their index in the list given; an empty pattern is never matched; of
// equal patterns the first (or, keep_last, the last) is the one reported.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace locost::text {

class byte_automaton {
public:
    byte_automaton() { clear(); }

    explicit byte_automaton(const std::vector<std::string_view>& patterns, bool keep_last = false) {
        build(patterns, keep_last);
        link();
    }

    static constexpr int root = 0;

    int step(int s, unsigned char c) const {
        for (;;) {
            if (const int t = child(s, c); t >= 0) return t;
            if (s == root) return root;
            s = fail_[static_cast<std::size_t>(s)];
        }
    }

    // The pattern that ends at s and is longest, or -1.
    int longest(int s) const {
        const int own = out_[static_cast<std::size_t>(s)];
        if (own >= 0) return own;
        const int d = dict_[static_cast<std::size_t>(s)];
        return d >= 0 ? out_[static_cast<std::size_t>(d)] : -1;
    }

    // f(pattern, length) for every pattern ending at s, longest first.
    template <class F>
    void each_match(int s, F&& f) const {
        if (out_[static_cast<std::size_t>(s)] < 0) s = dict_[static_cast<std::size_t>(s)];
        while (s >= 0) {
            f(out_[static_cast<std::size_t>(s)], static_cast<std::size_t>(depth_[static_cast<std::size_t>(s)]));
            s = dict_[static_cast<std::size_t>(s)];
        }
    }

    std::size_t states() const noexcept { return out_.size(); }

private:
    void clear() {
        edge_begin_.assign({0, 0});
        label_.clear();
        out_.assign(1, -1);
        fail_.assign(1, root);
        dict_.assign(1, -1);
        depth_.assign(1, 0);
        parent_.assign(1, -1);
    }

    // The trie, breadth first, from the patterns sorted by content: a state is a run of sorted
    // patterns sharing its prefix, its children the runs of equal next bytes, made in byte order;
    // every state but the root is made with the edge into it, so edge e leads to state e + 1 and
    // state v's edges are edge_begin_[v] .. edge_begin_[v + 1]. A loop over a queue rather than
    // recursion, since a pattern can be as long as a file.
    void build(const std::vector<std::string_view>& patterns, bool keep_last) {
        edge_begin_.clear();
        label_.clear();
        out_.clear();
        fail_.clear();
        dict_.clear();
        depth_.clear();
        parent_.clear();
        std::vector<int> order;
        for (std::size_t i = 0; i < patterns.size(); ++i)
            if (!patterns[i].empty()) order.push_back(static_cast<int>(i));
        std::sort(order.begin(), order.end(), [&](int x, int y) {
            const int c = patterns[static_cast<std::size_t>(x)].compare(patterns[static_cast<std::size_t>(y)]);
            return c != 0 ? c < 0 : (keep_last ? x > y : x < y);
        });
        struct run {
            std::size_t lo, hi, depth;
            int parent;
        };
        std::vector<run> runs{{0, order.size(), 0, -1}};
        auto content = [&](std::size_t k) { return patterns[static_cast<std::size_t>(order[k])]; };
        for (std::size_t v = 0; v < runs.size(); ++v) {
            const run r = runs[v];
            edge_begin_.push_back(label_.size());
            depth_.push_back(static_cast<std::int64_t>(r.depth));
            parent_.push_back(r.parent);
            std::size_t k = r.lo;
            // Patterns that end here sort first in the run; the first of them is the one reported.
            out_.push_back(k < r.hi && content(k).size() == r.depth ? order[k] : -1);
            while (k < r.hi && content(k).size() == r.depth) ++k;
            while (k < r.hi) {
                const char c = content(k)[r.depth];
                std::size_t e = k + 1;
                while (e < r.hi && content(e)[r.depth] == c) ++e;
                label_.push_back(static_cast<unsigned char>(c));
                runs.push_back({k, e, r.depth + 1, static_cast<int>(v)});
                k = e;
            }
        }
        edge_begin_.push_back(label_.size());
    }

    // Failure and dictionary links, in the breadth-first order the states were made (a state's
    // failure target is shallower, so it is linked already).
    void link() {
        const std::size_t n = out_.size();
        fail_.assign(n, root);
        dict_.assign(n, -1);
        for (std::size_t v = 1; v < n; ++v) {
            const int p = parent_[v];
            const unsigned char c = label_[v - 1];
            int f = root;
            if (p != root) {
                for (int s = fail_[static_cast<std::size_t>(p)];; s = fail_[static_cast<std::size_t>(s)]) {
                    if (const int t = child(s, c); t >= 0) {
                        f = t;
                        break;
                    }
                    if (s == root) break;
                }
            }
            fail_[v] = f;
            dict_[v] = out_[static_cast<std::size_t>(f)] >= 0 ? f : dict_[static_cast<std::size_t>(f)];
        }
        parent_.clear();
        parent_.shrink_to_fit();
    }

    int child(int s, unsigned char c) const {
        const unsigned char* lo = label_.data() + edge_begin_[static_cast<std::size_t>(s)];
        const unsigned char* hi = label_.data() + edge_begin_[static_cast<std::size_t>(s) + 1];
        const unsigned char* e = std::lower_bound(lo, hi, c);
        return e != hi && *e == c ? static_cast<int>(e - label_.data()) + 1 : -1;
    }

    std::vector<std::size_t> edge_begin_;  // per state, and one past the last: its edges in label_
    std::vector<unsigned char> label_;     // per edge, its byte; ascending within a state
    std::vector<int> out_;                 // per state, the pattern ending exactly there, or -1
    std::vector<int> fail_;                // per state, its longest proper suffix that is a state
    std::vector<int> dict_;                // per state, its nearest proper suffix state with a pattern, or -1
    std::vector<std::int64_t> depth_;      // per state, its length
    std::vector<int> parent_;              // (while building)
};

}  // namespace locost::text
