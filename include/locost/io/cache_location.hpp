// Where repository ids (`org/name[@revision]`) are looked up: the Hugging Face cache the caller
// names, or else the environment's (io/hub_cache.hpp says which variables, in which order). A
// checkpoint remembers the one it was opened with, so that what it names in turn (a SLED
// backbone, its tokenizer) comes from the same cache.
#pragma once
#include <string>

namespace locost::io {

struct cache_location {
    std::string dir;       // the cache directory, as from_pretrained's cache_dir; empty: the environment's
    std::string named_by;  // how messages name the choice: "--cache-dir", "cache_dir"

    bool given() const noexcept { return !dir.empty(); }
};

}  // namespace locost::io
