// The memory estimate (models/memory_estimate.hpp) against what a model allocates: its
// cross-attention cache in every precision and form. (The GPU estimate is checked against an
// emulated device in tests/device/test_device.cpp.)
#include "helpers.hpp"

#include <string>
#include <vector>

namespace {

using namespace test;
using locost::cpu;

}  // namespace

TEST_CASE("memory estimate: its cross-attention cache is the bytes the model allocates, in every precision and for padded rows") {
    // The estimate (models/memory_estimate.hpp) is computed before a model exists; here its
    // largest input-dependent part is checked against the cache a model then builds.
    const auto ck = locost::io::checkpoint::open(tiny_dir);
    const auto cfg = locost::models::read_config(ck);
    const std::vector<std::int64_t> ids = [] {
        std::vector<std::int64_t> v(2 * 300, 0);
        for (int i = 0; i < 300; ++i) v[static_cast<std::size_t>(i)] = 5 + i % 90;
        for (int i = 0; i < 170; ++i) v[static_cast<std::size_t>(300 + i)] = 7 + i % 50;
        return v;
    }();
    std::vector<float> mask(ids.size(), 0.0f);
    for (int i = 0; i < 300; ++i) mask[static_cast<std::size_t>(i)] = 1;
    for (int i = 0; i < 170; ++i) mask[static_cast<std::size_t>(300 + i)] = 1;
    for (auto form : {locost::models::cross_attention_form::cached, locost::models::cross_attention_form::folded})
        for (auto p : {locost::models::cross_cache_precision::automatic, locost::models::cross_cache_precision::f32,
                       locost::models::cross_cache_precision::bf16, locost::models::cross_cache_precision::i8}) {
            locost::models::model_options o;
            o.cross_cache = p;
            o.cross_attention = form;
            const std::string title = form == locost::models::cross_attention_form::folded ? "encoder states for folded cross-attention ("
                                                                                           : "cross-attention cache (";
            auto m = locost::models::load_model<float, cpu>(ck, o);
            const auto e = m.encode(ids.data(), mask.data(), 2, 300);
            locost::models::memory_request r;
            r.batch = 2;
            r.length = 300;
            r.valid_tokens = 470;
            r.decoder = true;
            r.decoder_positions = 8;
            const auto est = locost::models::estimate_memory(*cfg, o, r);
            double cache = -1;
            for (const auto& item : est.phases.back().items)
                if (item.what.rfind(title, 0) == 0) {
                    cache = item.bytes;
                    CHECK(item.what == title + locost::models::precision_name(e.precision) + ")");
                }
            CAPTURE(static_cast<int>(p));
            CAPTURE(static_cast<int>(form));
            CHECK(cache == static_cast<double>(e.bytes()));
        }
}
