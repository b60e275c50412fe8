// Learned absolute positions (BART, LED) — BartLearnedPositionalEmbedding:
//
//     x[t] += E[offset + first + t]          E: (max_positions + offset, H)
//
// The offset is a leftover of fairseq, which reserved the first rows for padding; Hugging Face
// keeps BART's table as trained and adds 2 to every position (LED's has no offset). Positions
// count from the start of the sequence (the encoder's input, or the decoder's first token)
// whatever the padding, as Hugging Face does for right-padded batches. A position past the table
// is an error the model reports before calling add() (max_positions()).
//
// Name, under the stack's prefix the family gives: embed_positions.weight.
#pragma once
#include "../ops/rows.hpp"
#include "parameter.hpp"
#include "tensor_source.hpp"

namespace locost::layers {

template <class Scalar, class Backend>
class learned_positions {
public:
    // The stack's table of `positions` rows (offset included) of width H.
    static tensor<float> read(const tensor_source& stack, index_t positions, index_t H) {
        return stack.get("embed_positions.weight", {positions, H}, {param_kind::positions});
    }

    learned_positions() = default;
    learned_positions(const tensor<float>& table, index_t offset) : table_(to_backend<Scalar, Backend>(table)), offset_(offset) {}

    // How many positions the table holds.
    index_t max_positions() const noexcept { return table_.empty() ? 0 : table_.dim(0) - offset_; }

    // x (rows·T, H): row r's t-th vector gets position first + t.
    void add(Scalar* x, index_t rows, index_t T, index_t first) const {
        ops::add_position_rows<Backend>(table_.data(), table_.dim(1), offset_ + first, rows, T, x);
    }

private:
    tensor<Scalar, Backend> table_;
    index_t offset_ = 0;
};

}  // namespace locost::layers
