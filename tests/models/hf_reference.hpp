// Shared by the tests that compile with tests/models (the UNITY_GROUP hf_models of
// tests/CMakeLists.txt): the Hugging Face reference cases of tests/data/hf (transformers 5.17's own
// outputs; tests/data/hf/README.md) for every family — T5 v1.1 and v1.0, BART, LongT5 local and
// transient-global, LED, Pegasus-X — and SLED over T5 and BART, their encoder batches, and the
// (backend, scalar) configurations, the emulated device among them (tests/device/emulated_device.hpp).
#pragma once
#include "device/emulated_device.hpp"
#include "helpers.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace {

using namespace test;
using locost::cpu;
using json = nlohmann::json;
namespace models = locost::models;
namespace fs = std::filesystem;

const std::string hf_dir = data_dir + "/hf";

template <class Backend, class Scalar>
struct config {
    using backend = Backend;
    using scalar = Scalar;
};
#define LOCOST_CONFIGS config<locost::cpu, float>, config<locost::cpu, double>
// The whole-model tests also run on the emulated device (tests/device/emulated_device.hpp): the host-side
// half of a GPU run, checked without one.
#define MODEL_CONFIGS LOCOST_CONFIGS, config<test::emulated, float>

// A reference case: its checkpoint folder and, for SLED, the settings the references used.
struct hf_case {
    const char* name;
    const char* checkpoint;
    index_t prefix = -1;                       // SLED prefix length; -1: no SLED
    std::vector<index_t> global_tokens = {0};  // LED
};
const hf_case hf_cases[] = {{"t5_v11", "t5_v11"},
                            {"t5_v10", "t5_v10"},
                            {"sled_t5_p0", "t5_v11", 0},
                            {"sled_t5_p6", "t5_v11", 6},
                            {"bart", "bart"},
                            {"sled_bart_p0", "bart", 0},
                            {"sled_bart_p6", "bart", 6},
                            {"longt5_local", "longt5_local"},
                            {"longt5_tglobal", "longt5_tglobal"},
                            {"led_g0", "led_g0"},
                            {"led_g1", "led_g0", -1, {0, 5, 50}},
                            {"pegasus_x", "pegasus_x"}};

models::model_options options_of(const hf_case& c) {
    models::model_options o;
    o.encoder.global_tokens = c.global_tokens;
    if (c.prefix >= 0) o.sled = models::sled_options{32, 0.5, c.prefix, true, true, 0};
    return o;
}

json read_json(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return json::parse(s.str());
}

struct batch {
    std::vector<std::int64_t> ids;
    std::vector<float> mask;
    std::vector<std::int64_t> mask01;
    index_t B = 0, L = 0;
};

batch encoder_batch(const reference& ref) {
    batch b;
    b.ids = ref.ints("enc.input_ids");
    b.mask01 = ref.ints("enc.attention_mask");
    b.mask.assign(b.mask01.begin(), b.mask01.end());
    b.B = ref.shape("enc.input_ids")[0];
    b.L = ref.shape("enc.input_ids")[1];
    return b;
}

// Each row's ids without its padding (what generation takes as the encoder's input rows).
locost::generation::token_rows unpadded_rows(const batch& in) {
    locost::generation::token_rows rows;
    for (index_t b = 0; b < in.B; ++b) {
        std::vector<std::int64_t> r;
        for (index_t l = 0; l < in.L; ++l)
            if (in.mask01[static_cast<std::size_t>(b * in.L + l)]) r.push_back(in.ids[static_cast<std::size_t>(b * in.L + l)]);
        rows.push_back(r);
    }
    return rows;
}

locost::generation::token_rows rows_of(const json& j) { return j.get<locost::generation::token_rows>(); }

}  // namespace
