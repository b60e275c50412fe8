// Shared by the tests of the locost tool (tests/tool): running it as a user runs it (run_tool,
// run_shell), the reference data, and the helpers that read and write its inputs and outputs.
#pragma once
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmath>
#include <limits>
#include <algorithm>
#include <map>
#include <regex>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <locost/locost.hpp>

#include "helpers.hpp"
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {

struct run_result {
    int rc;
    std::string out, err;
};

using test::slurp;

run_result run_tool(const std::string& arguments) {
    const fs::path dir = fs::path(LOCOST_TEST_TMP) / "cli";
    fs::create_directories(dir);
    const std::string cmd = std::string(LOCOST_TOOL) + " " + arguments + " >" + (dir / "out").string() + " 2>" + (dir / "err").string();
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "out"), slurp(dir / "err")};
}

const std::string data = LOCOST_TEST_DATA;
const std::string tiny = data + "/reference/tiny_locost";

using locost::index_t;

}  // namespace

namespace {

// Writes `j` as a JSON file under the test scratch folder and returns its path.
std::string json_file(const std::string& name, const nlohmann::json& j) {
    const fs::path p = fs::path(LOCOST_TEST_TMP) / ("cli-" + name + ".json");
    std::ofstream(p) << j.dump();
    return p.string();
}

std::vector<std::int64_t> ints_of(const locost::io::safetensors_file& f, const std::string& name) {
    const auto* r = f.find(name);
    REQUIRE(r);
    std::vector<std::int64_t> v(static_cast<std::size_t>(r->shape.numel()));
    std::memcpy(v.data(), r->bytes, v.size() * 8);
    return v;
}
std::vector<float> floats_of(const locost::io::safetensors_file& f, const std::string& name) {
    const auto* r = f.find(name);
    REQUIRE(r);
    std::vector<float> v(static_cast<std::size_t>(r->shape.numel()));
    std::memcpy(v.data(), r->bytes, v.size() * 4);
    return v;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b, const std::vector<bool>& keep = {}) {
    double d = 0, s = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (!keep.empty() && !keep[i]) continue;
        d = std::max(d, std::abs(double(a[i]) - b[i]));
        s = std::max(s, std::abs(double(b[i])));
    }
    return d / s;
}

}  // namespace

namespace {

const std::string hf = data + "/hf";

// The reference's encoder batch as the tool takes it: rows of their valid ids (the tool pads
// right and masks, as the reference batch is).
nlohmann::json hf_rows(const locost::io::safetensors_file& ref, std::vector<bool>* keep, index_t H) {
    const auto ids = ints_of(ref, "enc.input_ids"), mask = ints_of(ref, "enc.attention_mask");
    const auto shape = ref.find("enc.input_ids")->shape;
    nlohmann::json rows = nlohmann::json::array();
    for (index_t b = 0; b < shape[0]; ++b) {
        std::vector<std::int64_t> row;
        for (index_t l = 0; l < shape[1]; ++l) {
            if (mask[b * shape[1] + l]) row.push_back(ids[b * shape[1] + l]);
            if (keep)
                for (index_t h = 0; h < H; ++h) keep->push_back(mask[b * shape[1] + l] != 0);
        }
        rows.push_back(row);
    }
    return rows;
}

std::vector<std::string> lines_of(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string l; std::getline(ss, l);) out.push_back(l);
    return out;
}

}  // namespace

namespace {

// Runs a shell line with the tool's path in $LOCOST; stdout and stderr captured as run_tool does.
run_result run_shell(const std::string& line) {
    const fs::path dir = fs::path(LOCOST_TEST_TMP) / "cli";
    fs::create_directories(dir);
    const std::string cmd =
        "LOCOST='" + std::string(LOCOST_TOOL) + "' bash -c '" + line + "' >" + (dir / "out").string() + " 2>" + (dir / "err").string();
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "out"), slurp(dir / "err")};
}

// Overwrites the float32 values [first, first + count) of tensor `name` in a safetensors file.
void patch_tensor(const fs::path& file, const std::string& name, std::size_t first, std::size_t count, float value) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    std::uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string header(static_cast<std::size_t>(n), ' ');
    f.read(header.data(), static_cast<std::streamsize>(n));
    const auto j = nlohmann::json::parse(header);
    REQUIRE(j.contains(name));
    REQUIRE(j[name]["dtype"] == "F32");
    const auto begin = j[name]["data_offsets"][0].get<std::uint64_t>();
    f.seekp(static_cast<std::streamoff>(8 + n + begin + 4 * first));
    for (std::size_t i = 0; i < count; ++i) f.write(reinterpret_cast<const char*>(&value), 4);
    REQUIRE(f.good());
}

std::vector<std::string> leftovers(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".locost-tmp.") != std::string::npos) names.push_back(e.path().string());
    return names;
}

}  // namespace
