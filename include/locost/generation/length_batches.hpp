// Many short documents at batch speed: documents grouped into batches by length under a token
// budget (CTranslate2's batch_type="tokens" does the same).
//
// A decoding step reads the decoder's weights once for every row it runs, so a batch of n
// documents decodes about n times as fast per document as n runs one after another; the
// encoder's work does not shrink, and padding is work done for nothing. So documents are sorted by
// length (longest first: a batch that does not fit fails before the others ran) and cut into
// batches whose padded size, documents × longest length, stays within max_batch_tokens. A
// document longer than the budget goes alone. Generation drops the documents a batch has
// finished (search.hpp), and each document's ids are those of its own run.
#pragma once
#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

#include "../core/tensor.hpp"

namespace locost::generation {

// Batches of document indices (into `lengths`), each batch's documents longest first, such that
// size() × longest ≤ max_batch_tokens (or one document); max_batch_tokens ≤ 0: one document per
// batch, in the given order.
inline std::vector<std::vector<std::size_t>> length_batches(const std::vector<index_t>& lengths, index_t max_batch_tokens) {
    std::vector<std::size_t> order(lengths.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::vector<std::vector<std::size_t>> out;
    if (max_batch_tokens <= 0) {
        for (std::size_t i : order) out.push_back({i});
        return out;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return lengths[x] > lengths[y]; });
    for (std::size_t i : order) {
        if (!out.empty()) {
            auto& b = out.back();
            const index_t longest = lengths[b.front()];
            if (static_cast<index_t>(b.size() + 1) * longest <= max_batch_tokens) {
                b.push_back(i);
                continue;
            }
        }
        out.push_back({i});
    }
    return out;
}

}  // namespace locost::generation
