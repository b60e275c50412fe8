// What every decoder keeps while decoding, whatever its family: the cross-attention cache of
// each document (computed once, shared by every row that decodes it: beams are rows) and the
// rows' self-attention caches, which grow by one position per step and follow beam reordering.
// A family's decoder names these as its `document` and `state` (models/concepts.hpp), so the
// type-erased any_model serves every family.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "../config/error.hpp"
#include "../layers/kv_cache.hpp"
#include "cross_states.hpp"

namespace locost::models {

// cross_states: models/cross_states.hpp.

// Rows in flight: row r decodes document d for r in [row_begin[d], row_begin[d+1]). Rows that
// joined after others (join_documents) start at a later position: row r's n-th token sits at
// position first(r) + n, and attends to its own positions only.
template <class Scalar, class Backend>
struct decoder_state {
    std::vector<layers::self_cache<Scalar, Backend>> cache;  // per layer
    std::vector<const cross_states*> docs;
    std::vector<index_t> row_begin;
    index_t rows = 0, length = 0, capacity = 0;

    // Row r's first position (0 unless it joined a running batch).
    index_t first(index_t r) const { return cache.empty() ? 0 : cache.front().first_of(r); }

    // Layer l's keys/values of every document, in document order (valid until the next call).
    const std::vector<const layers::cross_kv*>& documents_of_layer(std::size_t l) {
        docs_of_layer_.clear();
        for (const cross_states* d : docs) docs_of_layer_.push_back(&d->of_layer(l));
        return docs_of_layer_;
    }

private:
    std::vector<const layers::cross_kv*> docs_of_layer_;
};

// An empty document of L positions for `layers` layers of `heads` heads of width d, in Backend's
// memory.
template <class Backend>
cross_states make_cross_states(index_t layers, ops::kv_precision p, index_t heads, index_t L, index_t d) {
    cross_states doc;
    doc.length = L;
    doc.layers.resize(static_cast<std::size_t>(layers));
    for (auto& l : doc.layers) l.allocate<Backend>(p, heads, L, d);
    return doc;
}

// An empty folded document: L encoder states of width H in precision p, in Backend's memory.
template <class Backend>
cross_states make_folded_states(ops::kv_precision p, index_t L, index_t H) {
    cross_states doc;
    doc.length = L;
    doc.folded = true;
    doc.states.allocate_states<Backend>(p, L, H);
    return doc;
}

// rows_per_doc[k] rows decode docs[k]; `capacity` positions per row.
template <class Scalar, class Backend>
decoder_state<Scalar, Backend> start_decoder_state(const std::vector<const cross_states*>& docs, const std::vector<index_t>& rows_per_doc,
                                                   index_t capacity, index_t layers, index_t heads, index_t d) {
    decoder_state<Scalar, Backend> s;
    s.docs = docs;
    s.row_begin.push_back(0);
    for (index_t n : rows_per_doc) s.row_begin.push_back(s.row_begin.back() + n);
    s.rows = s.row_begin.back();
    s.capacity = capacity;
    s.cache.resize(static_cast<std::size_t>(layers));
    for (auto& c : s.cache) c.allocate(s.rows, heads, capacity, d);
    return s;
}

// Error: decode.capacity when T more positions would outgrow the capacity given at start.
template <class Scalar, class Backend>
void check_capacity(const decoder_state<Scalar, Backend>& s, index_t T) {
    if (s.length + T > s.capacity)
        throw error("decode.capacity",
                    "decoder: " + std::to_string(s.length + T) + " positions exceed the capacity of " + std::to_string(s.capacity) +
                        " given at start");
}

// Row r continues from row src[r] (beam search): the caches are copied by the backend's ops.
template <class Scalar, class Backend>
void reorder_rows(decoder_state<Scalar, Backend>& s, const std::vector<index_t>& src) {
    for (auto& c : s.cache) c.reorder(src, s.length);
}

// Only the documents `keep` (positions in s.docs, ascending) decode on, with their rows: a batch
// drops the documents it has finished, so later steps compute and read for the others only.
template <class Scalar, class Backend>
void retain_documents(decoder_state<Scalar, Backend>& s, const std::vector<index_t>& keep) {
    std::vector<index_t> rows, begin{0};
    std::vector<const cross_states*> docs;
    for (std::size_t k = 0; k < keep.size(); ++k) {
        const auto d = static_cast<std::size_t>(keep[k]);
        LOCOST_ASSERT(d < s.docs.size() && (k == 0 || keep[k] > keep[k - 1]));
        for (index_t r = s.row_begin[d]; r < s.row_begin[d + 1]; ++r) rows.push_back(r);
        docs.push_back(s.docs[d]);
        begin.push_back(static_cast<index_t>(rows.size()));
    }
    for (auto& c : s.cache) c.reorder(rows, s.length);
    s.docs = std::move(docs);
    s.row_begin = std::move(begin);
    s.rows = static_cast<index_t>(rows.size());
}

// Documents join rows already decoding (continuous batching): rows_per_doc[k] new rows decode
// docs[k], each from its own position 0, placed at the state's current length; `capacity` more
// positions per new row. Positions before every row's first are dropped first (they belong to
// documents that left), so the state holds at most what its rows still read, whatever the number
// of documents that went through it.
template <class Scalar, class Backend>
void join_documents(decoder_state<Scalar, Backend>& s, const std::vector<const cross_states*>& docs,
                    const std::vector<index_t>& rows_per_doc, index_t capacity) {
    LOCOST_ASSERT(docs.size() == rows_per_doc.size());
    index_t drop = s.length;
    for (index_t r = 0; r < s.rows; ++r) drop = std::min(drop, s.first(r));
    const index_t length = s.length - drop;
    index_t more = 0;
    for (index_t n : rows_per_doc) more += n;
    const index_t cap = std::max(s.capacity - drop, length + capacity);
    for (auto& c : s.cache) c.regrow(drop, s.length, cap, more);
    for (std::size_t k = 0; k < docs.size(); ++k) {
        s.docs.push_back(docs[k]);
        s.row_begin.push_back(s.row_begin.back() + rows_per_doc[k]);
    }
    s.rows += more;
    s.length = length;
    s.capacity = cap;
}

}  // namespace locost::models
