// Models by name from the Hugging Face cache, offline: `org/name[@revision]` → the snapshot
// directory huggingface_hub downloaded it into. Nothing is ever fetched from the network.
//
// The cache is the one huggingface_hub uses (its constants): $HF_HUB_CACHE, else
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub. A repository `org/name` lives in CACHE/models--org--name:
//   refs/REVISION        the commit a branch or tag was at when downloaded (refs/main, refs/pr/1)
//   snapshots/COMMIT/    the repository's files at that commit, links into blobs/
//   blobs/HASH           the contents
// `@revision` (default main) is a ref, or a commit whose snapshot is there.
//
//   resolve_model_dir(s)  s itself when it exists on disk or is not a repository id; else the
//                         snapshot directory (cache_snapshot_dir(s): the cache only). Errors: checkpoint.not_in_cache (the paths looked in
//                         and how to get the files onto this machine), checkpoint.revision_not_in_cache
//                         (the refs and snapshots the cache holds).
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

namespace locost::io {

struct hub_name {
    std::string repo;      // "org/name" or "name"
    std::string revision;  // "main" unless given
};

// `org/name[@revision]` as huggingface_hub's validate_repo_id accepts a repository id: one or two
// parts of letters, digits, '-', '_' and '.', not starting or ending with '-' or '.', without
// "--" or "..", at most 96 characters. A revision may not hold ".." or start with '/'.
inline std::optional<hub_name> parse_hub_name(std::string_view s) {
    hub_name n;
    std::string_view repo = s;
    if (const auto at = s.find('@'); at != std::string_view::npos) {
        repo = s.substr(0, at);
        n.revision = std::string(s.substr(at + 1));
        if (n.revision.empty() || n.revision.find("..") != std::string::npos || n.revision.front() == '/' || n.revision.back() == '/')
            return std::nullopt;
        for (const char c : n.revision)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/')) return std::nullopt;
    } else {
        n.revision = "main";
    }
    if (repo.empty() || repo.size() > 96 || repo.find("--") != std::string_view::npos || repo.find("..") != std::string_view::npos) return std::nullopt;
    const auto slash = repo.find('/');
    if (slash != std::string_view::npos && repo.find('/', slash + 1) != std::string_view::npos) return std::nullopt;
    auto part_ok = [](std::string_view p) {
        if (p.empty() || p.front() == '-' || p.front() == '.' || p.back() == '-' || p.back() == '.') return false;
        return std::all_of(p.begin(), p.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; });
    };
    if (slash == std::string_view::npos ? !part_ok(repo) : !(part_ok(repo.substr(0, slash)) && part_ok(repo.substr(slash + 1)))) return std::nullopt;
    n.repo = std::string(repo);
    return n;
}

// The cache directory and the variable (or default) it came from.
inline std::pair<std::filesystem::path, std::string> hub_cache_dir() {
    namespace fs = std::filesystem;
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

// The snapshot directory of repository id `org/name[@revision]` in the cache, whatever the
// working directory holds. Errors as resolve_model_dir; a string that is no repository id is
// checkpoint.not_in_cache too.
inline std::string cache_snapshot_dir(const std::string& path_or_name) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto name = parse_hub_name(path_or_name);
    if (!name) throw error("checkpoint.not_in_cache", path_or_name + ": not a repository id (org/name[@revision])");
    const auto [cache, from] = hub_cache_dir();
    std::string folder = "models--" + name->repo;
    if (const auto slash = folder.find('/'); slash != std::string::npos) folder.replace(slash, 1, "--");
    const fs::path repo = cache / folder;
    if (!fs::is_directory(repo, ec))
        throw error("checkpoint.not_in_cache",
                    path_or_name + ": no such directory, and not in the Hugging Face cache (looked for " + repo.string() + "; the cache is " + from +
                        "). locost never downloads: where there is network, run `hf download " + name->repo +
                        "` (huggingface_hub) and copy " + folder + " into " + cache.string() + " here, or give the checkpoint's directory");
    // The revision: a ref naming a commit, or a commit with a snapshot.
    std::string commit;
    const fs::path ref = repo / "refs" / name->revision;
    if (fs::is_regular_file(ref, ec)) {
        std::ifstream f(ref);
        std::getline(f, commit);
        while (!commit.empty() && (commit.back() == '\r' || commit.back() == ' ' || commit.back() == '\n')) commit.pop_back();
        if (commit.empty() || commit.find('/') != std::string::npos || commit.find("..") != std::string::npos)
            throw error("checkpoint.revision_not_in_cache", ref.string() + ": expected a commit hash, found " + (commit.empty() ? "nothing" : "'" + commit + "'"));
    } else if (name->revision.find('/') == std::string::npos && fs::is_directory(repo / "snapshots" / name->revision, ec)) {
        commit = name->revision;
    }
    const fs::path snapshot = repo / "snapshots" / commit;
    if (commit.empty() || !fs::is_directory(snapshot, ec)) {
        auto list = [&](const fs::path& dir, bool recursive) {
            std::vector<std::string> names;
            std::error_code e;
            if (recursive) {
                for (fs::recursive_directory_iterator it(dir, e), end; !e && it != end; it.increment(e))
                    if (it->is_regular_file(e)) names.push_back(fs::relative(it->path(), dir, e).string());
            } else {
                for (fs::directory_iterator it(dir, e), end; !e && it != end; it.increment(e)) names.push_back(it->path().filename().string());
            }
            std::sort(names.begin(), names.end());
            std::string s;
            for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
            return s.empty() ? std::string("none") : s;
        };
        const std::string what = commit.empty() ? "no revision '" + name->revision + "'"
                                                : "refs/" + name->revision + " naming commit " + commit + " but no snapshot of it";
        throw error("checkpoint.revision_not_in_cache", name->repo + "@" + name->revision + ": " + repo.string() + " has " + what + " (refs: " +
                                                            list(repo / "refs", true) + "; snapshots: " + list(repo / "snapshots", false) + ")");
    }
    return snapshot.string();
}

// path_or_name itself when it exists on disk or is no repository id; else its snapshot directory.
inline std::string resolve_model_dir(const std::string& path_or_name) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(path_or_name, ec)) || !parse_hub_name(path_or_name)) return path_or_name;
    return cache_snapshot_dir(path_or_name);
}

} // namespace locost::io
