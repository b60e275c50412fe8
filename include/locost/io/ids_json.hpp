// Token ids given as JSON (the tool's --ids input): either one sequence, [5, 8, 1], or a batch,
// [[5, 8, 1], [7, 1]]. Rows may differ in length (the caller pads). Ids are non-negative
// integers (JSON 3.0 is not an integer); nothing nests deeper than two levels; neither the
// batch nor any row may be empty. check_ids_vocab() then checks them against a model.
// Positions in messages are [i] for a single sequence and [row][i] for a batch.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "../config/error.hpp"
#include "json.hpp"

namespace locost::io {

struct id_batch {
    std::vector<std::vector<std::int64_t>> rows;
    bool batched = false;  // true: an array of arrays; false: one array (batch of 1)
};

namespace detail {
inline std::string id_position(const id_batch& t, std::size_t row, std::size_t i) {
    return t.batched ? "[" + std::to_string(row) + "][" + std::to_string(i) + "]" : "[" + std::to_string(i) + "]";
}
}  // namespace detail

// Errors: ids.invalid_json, ids.not_array, ids.empty, ids.not_integer, ids.negative,
// ids.out_of_range, ids.too_deep (and ids.duplicate_key / ids.nesting_too_deep from the parser).
inline id_batch parse_ids_json(std::string_view text, const std::string& source) {
    const json j = parse_json(text, source, "ids");
    if (!j.is_array())
        throw error("ids.not_array",
                    source + ": expected an array of token ids or an array of arrays of token ids, found a JSON " + json_type_name(j));
    if (j.empty()) throw error("ids.empty", source + ": no token ids (empty array)");
    id_batch out;
    out.batched = j.front().is_array();
    auto read_row = [&](const json& row, std::size_t r) {
        std::vector<std::int64_t> ids;
        ids.reserve(row.size());
        for (std::size_t i = 0; i < row.size(); ++i) {
            const json& v = row[i];
            const std::string at = source + ": element " + detail::id_position(out, r, i);
            if (v.is_array() && out.batched)
                throw error("ids.too_deep", at + " is an array; token ids nest at most two levels ([[ids], [ids]])");
            if (!v.is_number_integer())
                throw error("ids.not_integer", at + " is a JSON " + json_type_name(v) + ", expected a non-negative integer");
            if (v.is_number_unsigned()) {
                const auto u = v.get<std::uint64_t>();
                if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                    throw error("ids.out_of_range", at + " is " + v.dump() + ", too large for a token id");
                ids.push_back(static_cast<std::int64_t>(u));
            } else {
                const auto s = v.get<std::int64_t>();
                if (s < 0) throw error("ids.negative", at + " is " + v.dump() + ", expected a non-negative integer");
                ids.push_back(s);
            }
        }
        return ids;
    };
    if (!out.batched) {
        out.rows.push_back(read_row(j, 0));
        return out;
    }
    for (std::size_t r = 0; r < j.size(); ++r) {
        const json& row = j[r];
        if (!row.is_array())
            throw error("ids.not_array",
                        source + ": element [" + std::to_string(r) + "] is a JSON " + json_type_name(row) +
                            ", expected an array of token ids like element [0]");
        if (row.empty()) throw error("ids.empty", source + ": row " + std::to_string(r) + " has no token ids");
        out.rows.push_back(read_row(row, r));
    }
    return out;
}

// Every id must be below vocab_size. Error: ids.out_of_vocab.
inline void check_ids_vocab(const id_batch& t, std::int64_t vocab_size, const std::string& source) {
    for (std::size_t r = 0; r < t.rows.size(); ++r)
        for (std::size_t i = 0; i < t.rows[r].size(); ++i)
            if (t.rows[r][i] >= vocab_size)
                throw error("ids.out_of_vocab",
                            source + ": token id " + std::to_string(t.rows[r][i]) + " at " + detail::id_position(t, r, i) +
                                " is not below the vocabulary size " + std::to_string(vocab_size));
}

}  // namespace locost::io
