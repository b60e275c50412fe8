// Models by name from the Hugging Face cache, offline: `org/name[@revision]` → the snapshot
// directory huggingface_hub downloaded it into. Nothing is ever fetched from the network.
//
// The cache is the one huggingface_hub uses (its constants): $HF_HUB_CACHE, else
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub; a cache directory the caller names (cache_location: Python's
// cache_dir=, the tool's --cache-dir) takes their place, as from_pretrained's cache_dir does. A repository `org/name` lives in CACHE/models--org--name:
//   refs/REVISION        the commit a branch or tag was at when downloaded (refs/main, refs/pr/1)
//   snapshots/COMMIT/    the repository's files at that commit, links into blobs/
//   blobs/HASH           the contents
// `@revision` (default main) is a ref, or a commit whose snapshot is there.
//
//   resolve_model_dir(s[, cache])  s itself when it exists on disk or is not a repository id; else the
//                         snapshot directory (cache_snapshot_dir(s): the cache only). Errors: checkpoint.not_in_cache (the paths looked in
//                         and how to get the files onto this machine; a repository or snapshot folder that is a link),
//                         checkpoint.revision_not_in_cache (the refs and snapshots the cache holds), checkpoint.bad_ref
//                         (a ref that is a link, too large, or holds no commit hash).
// Nothing outside the cache is read through a name: links out of it are refused, never followed,
// and whatever a message quotes from the cache is escaped and cut (io/printable.hpp).
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "../config/error.hpp"
#include "cache_location.hpp"
#include "printable.hpp"

namespace locost::io {

struct hub_name {
    std::string repo;      // "org/name" or "name"
    std::string revision;  // "main" unless given
};

// `org/name[@revision]` as huggingface_hub's validate_repo_id accepts a repository id: one or two
// parts of letters, digits, '-', '_' and '.', not starting or ending with '-' or '.', without
// "--" or "..", at most 96 characters. A revision is '/'-separated names of letters, digits, '-',
// '_' and '.', none of them empty, "." or "..".
inline std::optional<hub_name> parse_hub_name(std::string_view s) {
    hub_name n;
    std::string_view repo = s;
    if (const auto at = s.find('@'); at != std::string_view::npos) {
        repo = s.substr(0, at);
        n.revision = std::string(s.substr(at + 1));
        if (n.revision.empty() || n.revision.find("..") != std::string::npos || n.revision.front() == '/' || n.revision.back() == '/' ||
            n.revision.find("//") != std::string::npos || n.revision == "." || n.revision.rfind("./", 0) == 0 ||
            n.revision.find("/./") != std::string::npos ||
            (n.revision.size() >= 2 && n.revision.compare(n.revision.size() - 2, 2, "/.") == 0))
            return std::nullopt;
        for (const char c : n.revision)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/')) return std::nullopt;
    } else {
        n.revision = "main";
    }
    if (repo.empty() || repo.size() > 96 || repo.find("--") != std::string_view::npos || repo.find("..") != std::string_view::npos)
        return std::nullopt;
    const auto slash = repo.find('/');
    if (slash != std::string_view::npos && repo.find('/', slash + 1) != std::string_view::npos) return std::nullopt;
    auto part_ok = [](std::string_view p) {
        if (p.empty() || p.front() == '-' || p.front() == '.' || p.back() == '-' || p.back() == '.') return false;
        return std::all_of(p.begin(), p.end(),
                           [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; });
    };
    if (slash == std::string_view::npos ? !part_ok(repo) : !(part_ok(repo.substr(0, slash)) && part_ok(repo.substr(slash + 1))))
        return std::nullopt;
    n.repo = std::string(repo);
    return n;
}

// The cache directory and the choice (a given directory, a variable or the default) it came from.
inline std::pair<std::filesystem::path, std::string> hub_cache_dir(const cache_location& given = {}) {
    namespace fs = std::filesystem;
    if (given.given()) return {fs::path(given.dir), given.dir + " (" + given.named_by + ")"};
    auto env = [](const char* name) -> std::optional<std::string> {
        const char* v = std::getenv(name);
        if (!v || !*v) return std::nullopt;
        return std::string(v);
    };
    auto expand = [&](std::string p) {
        if (p.rfind("~/", 0) == 0 || p == "~")
            if (const auto home = env("HOME")) p = *home + p.substr(1);
        return fs::path(p);
    };
    if (const auto v = env("HF_HUB_CACHE")) return {expand(*v), "$HF_HUB_CACHE"};
    if (const auto v = env("HUGGINGFACE_HUB_CACHE")) return {expand(*v), "$HUGGINGFACE_HUB_CACHE"};
    if (const auto v = env("HF_HOME")) return {expand(*v) / "hub", "$HF_HOME/hub"};
    if (const auto v = env("XDG_CACHE_HOME")) return {expand(*v) / "huggingface" / "hub", "$XDG_CACHE_HOME/huggingface/hub"};
    return {expand("~/.cache/huggingface/hub"), "~/.cache/huggingface/hub"};
}

namespace detail {

// The largest ref file read: huggingface_hub writes a 40-digit commit hash, nothing more.
inline constexpr std::size_t max_ref_bytes = 256;

inline bool is_commit_hash(std::string_view s) {
    return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A name a snapshot folder may have (what a ref may hold besides a commit hash): letters, digits,
// '-', '_' and '.', at most 64, not "." or "..".
inline bool is_snapshot_name(std::string_view s) {
    if (s.empty() || s.size() > 64 || s == "." || s == "..") return false;
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; });
}

// Whether p is a directory itself, not a symbolic link to one.
inline bool real_directory(const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::symlink_status(p, ec).type() == std::filesystem::file_type::directory;
}

// Names under dir (recursive: paths relative to it), sorted and escaped, at most `shown` of them
// and the count of the rest; "none" for none. Only entries that are no links are listed.
inline std::string list_names(const std::filesystem::path& dir, bool recursive, std::size_t shown = 12) {
    namespace fs = std::filesystem;
    std::vector<std::string> names;
    std::error_code e;
    constexpr std::size_t cap = 100000;  // (a folder of millions of refs is not listed whole)
    if (recursive) {
        for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, e), end; !e && it != end && names.size() < cap;
             it.increment(e))
            if (it->is_regular_file(e) && !it->is_symlink(e)) names.push_back(fs::relative(it->path(), dir, e).string());
    } else {
        for (fs::directory_iterator it(dir, e), end; !e && it != end && names.size() < cap; it.increment(e))
            names.push_back(it->path().filename().string());
    }
    std::sort(names.begin(), names.end());
    std::string s;
    for (std::size_t i = 0; i < names.size() && i < shown; ++i) s += (s.empty() ? "" : ", ") + printable(names[i], 64);
    if (names.size() > shown) s += ", and " + std::to_string(names.size() - shown) + (names.size() >= cap ? " or more" : "") + " more";
    return s.empty() ? std::string("none") : s;
}

// The commit a ref file names. The ref must be a regular file of the repository (not a link: a
// copied cache whose refs/main points at ../../../token must not be read), of at most
// max_ref_bytes, holding a commit hash or a snapshot name. Error: checkpoint.bad_ref.
inline std::string read_ref(const std::filesystem::path& ref) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto st = fs::symlink_status(ref, ec);
    const std::string where = printable(ref.string(), 400);
    if (st.type() == fs::file_type::symlink)
        throw error("checkpoint.bad_ref",
                    where +
                        ": is a symbolic link; a ref of the Hugging Face cache is a file holding a commit hash, and "
                        "links are not followed out of the cache");
    if (st.type() != fs::file_type::regular)
        throw error("checkpoint.bad_ref",
                    where + ": is not a regular file; a ref of the Hugging Face cache is a file holding a commit hash");
    std::ifstream f(ref, std::ios::binary);
    std::string text(max_ref_bytes + 1, '\0');
    f.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(f.gcount()));
    if (text.size() > max_ref_bytes)
        throw error("checkpoint.bad_ref",
                    where + ": holds more than " + std::to_string(max_ref_bytes) +
                        " bytes; a ref of the Hugging Face cache holds one commit hash");
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
    if (!is_commit_hash(text) && !is_snapshot_name(text))
        throw error("checkpoint.bad_ref",
                    where + ": expected a commit hash, found " + (text.empty() ? std::string("nothing") : "'" + printable(text, 64) + "'"));
    return text;
}

}  // namespace detail

// The snapshot directory of repository id `org/name[@revision]` in the cache, whatever the
// working directory holds. The repository, its refs/ and snapshots/ folders and the snapshot
// must be real directories (no links: one out of the cache would make what it points at read
// as the checkpoint), a ref a regular file (detail::read_ref). Errors as resolve_model_dir, and
// checkpoint.bad_ref, checkpoint.not_in_cache for a folder that is a link; a string that is no
// repository id is checkpoint.not_in_cache too.
inline std::string cache_snapshot_dir(const std::string& path_or_name, const cache_location& given = {}) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto name = parse_hub_name(path_or_name);
    if (!name) throw error("checkpoint.not_in_cache", detail::printable(path_or_name, 200) + ": not a repository id (org/name[@revision])");
    const auto [cache, from] = hub_cache_dir(given);
    // A cache the caller named must be there: looking inside a typo would only say "not in the cache".
    if (given.given() && !fs::is_directory(cache, ec))
        throw error("checkpoint.not_in_cache",
                    path_or_name + ": " + given.named_by + " '" + detail::printable(given.dir, 400) + "' is not a directory");
    std::string folder = "models--" + name->repo;
    if (const auto slash = folder.find('/'); slash != std::string::npos) folder.replace(slash, 1, "--");
    const fs::path repo = cache / folder;
    if (!fs::is_directory(repo, ec))
        throw error("checkpoint.not_in_cache",
                    path_or_name + ": no such directory, and not in the Hugging Face cache (looked for " + repo.string() +
                        "; the cache is " + from + "). locost never downloads: where there is network, run `hf download " + name->repo +
                        "` (huggingface_hub) and copy " + folder + " into " + cache.string() + " here, or give the checkpoint's directory");
    for (const fs::path& d : {repo, repo / "refs", repo / "snapshots"})
        if (fs::exists(fs::symlink_status(d, ec)) && !detail::real_directory(d))
            throw error("checkpoint.not_in_cache",
                        path_or_name + ": " + detail::printable(d.string(), 400) +
                            " is a symbolic link or not a directory; a repository of the Hugging Face cache is read from "
                            "its own folders only (copy the folder itself, not a link to it)");
    // The revision: a ref naming a commit, or a commit with a snapshot.
    std::string commit;
    const fs::path ref = repo / "refs" / name->revision;
    if (fs::exists(fs::symlink_status(ref, ec))) {
        commit = detail::read_ref(ref);
    } else if (name->revision.find('/') == std::string::npos && fs::exists(fs::symlink_status(repo / "snapshots" / name->revision, ec))) {
        commit = name->revision;
    }
    const fs::path snapshot = repo / "snapshots" / commit;
    if (!commit.empty() && fs::exists(fs::symlink_status(snapshot, ec)) && !detail::real_directory(snapshot))
        throw error("checkpoint.not_in_cache",
                    path_or_name + ": " + detail::printable(snapshot.string(), 400) +
                        " is a symbolic link or not a directory; a snapshot of the Hugging Face cache is a folder of "
                        "the repository (its files link into the repository's blobs/)");
    if (commit.empty() || !detail::real_directory(snapshot)) {
        const std::string what = commit.empty() ? "no revision '" + name->revision + "'"
                                                : "refs/" + name->revision + " naming commit " + commit + " but no snapshot of it";
        throw error("checkpoint.revision_not_in_cache",
                    name->repo + "@" + name->revision + ": " + repo.string() + " has " + what + " (refs: " +
                        detail::list_names(repo / "refs", true) + "; snapshots: " + detail::list_names(repo / "snapshots", false) + ")");
    }
    return snapshot.string();
}

// path_or_name itself when it exists on disk or is no repository id; else its snapshot directory.
inline std::string resolve_model_dir(const std::string& path_or_name, const cache_location& given = {}) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(path_or_name, ec)) || !parse_hub_name(path_or_name)) return path_or_name;
    return cache_snapshot_dir(path_or_name, given);
}

}  // namespace locost::io
