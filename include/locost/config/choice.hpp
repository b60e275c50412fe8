// A string naming an enum value, for the string↔enum tables kept beside each enum that an option
// selects (models/options.hpp, generation/options.hpp, ...): the option table (options/table.hpp)
// reads a value through them, and the tool, Python and the server accept the same names.
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

namespace locost {

// `alias`: accepted, never listed (fp32 and f32 beside float32).
struct choice {
    std::string_view name;
    int value;
    bool alias = false;
};

template <std::size_t N>
std::vector<choice> choices_of(const choice (&table)[N]) {
    return {table, table + N};
}

// The value `name` names in `table`, or false.
template <class Enum, std::size_t N>
bool enum_of(const choice (&table)[N], std::string_view name, Enum& out) {
    for (const auto& c : table)
        if (c.name == name) {
            out = static_cast<Enum>(c.value);
            return true;
        }
    return false;
}

// The listed name of `value` in `table`.
template <class Enum, std::size_t N>
std::string_view name_of(const choice (&table)[N], Enum value) {
    for (const auto& c : table)
        if (!c.alias && c.value == static_cast<int>(value)) return c.name;
    return "?";
}

}  // namespace locost
