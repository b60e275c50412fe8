// What encoding a batch gives, for any family: each document's cross-attention keys and values
// (or, folded, its encoder states). On its own, without the layers that fill it, so that the
// public API's light headers (locost/api.hpp) can hold an encoded batch.
#pragma once
#include <cstddef>
#include <vector>

#include "../layers/cross_kv.hpp"

namespace locost::models {

// One document's cross-attention keys and values, every layer; or, folded
// (layers::folded_cross_attention), its encoder states once for all layers.
struct cross_states {
    std::vector<layers::cross_kv> layers;
    layers::cross_kv states;  // folded only
    bool folded = false;
    index_t length = 0;
    std::size_t bytes() const {
        std::size_t b = folded ? states.bytes() : 0;
        for (const auto& l : layers) b += l.bytes();
        return b;
    }
    // Layer l's keys/values (folded: the states every layer shares).
    const layers::cross_kv& of_layer(std::size_t l) const { return folded ? states : layers[l]; }
};

// The encoded batch: one cross-attention cache per document.
template <class Document>
struct encoded_batch {
    std::vector<Document> docs;
    ops::kv_precision precision = ops::kv_precision::f32;
    std::size_t bytes() const {
        std::size_t b = 0;
        for (const auto& d : docs) b += d.bytes();
        return b;
    }
};

}  // namespace locost::models
