// Learned absolute positions (BART, LED) — BartLearnedPositionalEmbedding:
//
//     x[t] += E[offset + first + t]          E: (max_positions + offset, H), offset 2
//
// The offset is a leftover of fairseq, which reserved the first rows for padding; Hugging Face
// keeps the table as trained and adds 2 to every position. Positions count from the start of
// the sequence (the encoder's input, or the decoder's first token) whatever the padding, as
// Hugging Face does for right-padded batches. A position past the table is an error the model
// reports before calling add() (max_positions()).
#pragma once
#include <cstdint>
#include <vector>

#include "../ops/embedding.hpp"
#include "parameter.hpp"

namespace locost::layers {

template <class Scalar, class Backend>
class learned_positions {
public:
    learned_positions() = default;
    learned_positions(const tensor<float>& table, index_t offset) : table_(to_backend<Scalar, Backend>(table)), offset_(offset) {}

    // How many positions the table holds.
    index_t max_positions() const noexcept { return table_.numel() ? table_.dim(0) - offset_ : 0; }

    // x (rows·T, H): row r's t-th vector gets position first + t.
    void add(Scalar* x, index_t rows, index_t T, index_t first) const {
        std::vector<std::int64_t> pos(static_cast<std::size_t>(rows * T));
        for (index_t r = 0; r < rows; ++r)
            for (index_t t = 0; t < T; ++t) pos[static_cast<std::size_t>(r * T + t)] = offset_ + first + t;
        const backend_array<std::int64_t, Backend> ids(pos.data(), rows * T);  // a device reads its own copy
        ops::add_embedding<Backend>(table_.data(), table_.dim(1), ids.data(), rows * T, x);
    }

private:
    tensor<Scalar, Backend> table_;
    index_t offset_ = 0;
};

} // namespace locost::layers
