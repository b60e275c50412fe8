// The model code on a device the host may not touch (tests/device/emulated_device.hpp): everything a GPU
// run does on the host side — weights uploaded once, caches grown and reordered by ops, biases
// and masks built by ops, logits and states brought back by explicit transfers — is checked here
// without a GPU. The emulated device computes with the CPU's kernels, so its numbers must be the
// CPU backend's and the references'; where a device takes another path than the host (whole-length
// S4D kernels instead of kernels cut at their support), the difference is bounded explicitly.
#include "emulated_device.hpp"
#include "helpers.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace {

using namespace test;
using locost::cpu;

template <class Backend>
locost::models::any_model<float, Backend> load(const std::string& dir, locost::models::model_options o = {}) {
    return locost::models::load_model<float, Backend>(locost::io::checkpoint::open(dir), o);
}

// max|a − b| / max|b|.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    return rel_error(a.data(), b);
}


}  // namespace

TEST_CASE("emulated device: host code that touches its memory faults (the check is real)") {
    locost::tensor<float, emulated> t({1000});
    std::vector<float> ones(1000, 1.0f), back(1000);
    locost::transfer<emulated>::upload(t.data(), ones.data(), ones.size());  // through a transfer: allowed
    locost::transfer<emulated>::download(back.data(), t.data(), back.size());
    CHECK(back == ones);
    std::fflush(nullptr);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        std::freopen("/dev/null", "w", stderr);  // the handler's message is expected here
        volatile float* p = t.data();
        p[10] = 2.0f;  // a direct write, as a host loop over a device tensor would do
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGSEGV);
}

TEST_CASE("emulated device: LOCOST encoder states equal the original's and the CPU backend's") {
    const auto ck = locost::io::checkpoint::open(tiny_dir);
    auto dev = locost::models::load_encoder<float, emulated>(ck);
    auto host = locost::models::load_encoder<float, cpu>(ck);
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    for (const char* p : {"enc.L1", "enc.L7", "enc.L64", "enc.L1000", "enc.padded"}) {
        CAPTURE(p);
        std::vector<bool> keep;
        const auto h = encode_reference_case(dev, ref, p, keep);
        CHECK(rel_error(h.data(), ref.floats(std::string(p) + ".last_hidden_state"), keep) < parity);
        const auto c = encode_reference_case(host, ref, p, keep);
        CHECK(rel_error(h.data(), c, keep) < 1e-5);
    }
}

TEST_CASE("emulated device: LOCOST teacher-forced logits and cached greedy steps equal the original's and the CPU backend's") {
    const reference dec(reference_dir + "/locost_decoder.safetensors");
    const auto want = dec.floats("greedy.step_logits");
    const index_t steps = dec.shape("greedy.step_logits")[0];
    const auto enc_ids = dec.ints("greedy.enc_input_ids");
    using locost::models::cross_cache_precision;
    using locost::ops::weight_precision;
    struct run {
        const char* name;
        locost::models::model_options o;
    };
    std::vector<run> runs(5);
    runs[0].name = "float32";
    runs[1].name = "bfloat16 cross cache";
    runs[1].o.cross_cache = cross_cache_precision::bf16;
    runs[2].name = "int8 cross cache";
    runs[2].o.cross_cache = cross_cache_precision::i8;
    runs[3].name = "folded cross-attention";
    runs[3].o.cross_attention = locost::models::cross_attention_form::folded;
    runs[4].name = "int8 weights";
    runs[4].o.weights = weight_precision::i8;
    for (const auto& r : runs) {
        CAPTURE(r.name);
        auto dev = load<emulated>(tiny_dir, r.o);
        auto host = load<cpu>(tiny_dir, r.o);
        std::vector<std::int64_t> seq_dev, seq_host;
        const auto got = greedy_step_logits(dev, enc_ids, steps, seq_dev);
        const auto ref_host = greedy_step_logits(host, enc_ids, steps, seq_host);
        CHECK(seq_dev == seq_host);
        CHECK(rel_diff(got, ref_host) < 1e-5);
        if (r.o.weights == weight_precision::native && r.o.cross_cache == cross_cache_precision::automatic &&
            r.o.cross_attention == locost::models::cross_attention_form::cached) {
            CHECK(rel_error(got.data(), want) < parity);
            std::vector<std::int64_t> s(seq_dev.begin(), seq_dev.end());
            const auto ref_seq = dec.ints("greedy.sequence");
            s.resize(std::min(s.size(), ref_seq.size()));
            CHECK(s == ref_seq);
        }
    }
    // Teacher forcing (a padded batch): logits come back to the host.
    auto dev = load<emulated>(tiny_dir);
    auto host = load<cpu>(tiny_dir);
    const reference enc(reference_dir + "/locost_encoder.safetensors");
    const auto ids = enc.ints("enc.padded.input_ids");
    const auto shape = enc.shape("enc.padded.input_ids");
    const auto m = enc.ints("enc.padded.attention_mask");
    const std::vector<float> mask(m.begin(), m.end());
    const auto d = dec.ints("dec.padded.decoder_input_ids");
    const index_t T = dec.shape("dec.padded.decoder_input_ids")[1];
    const auto a = host_values(dev.score(ids.data(), mask.data(), shape[0], shape[1], d.data(), T));
    const auto b = host_values(host.score(ids.data(), mask.data(), shape[0], shape[1], d.data(), T));
    CHECK(rel_error(a.data(), dec.floats("dec.padded.logits")) < parity);
    CHECK(rel_diff(a, b) < 1e-5);
}

TEST_CASE("emulated device: beam search (caches reordered by ops) returns the CPU backend's beams") {
    auto dev = load<emulated>(tiny_dir);
    auto host = load<cpu>(tiny_dir);
    const reference dec(reference_dir + "/locost_decoder.safetensors");
    const auto ids = dec.ints("greedy.enc_input_ids");
    auto o = locost::generation::default_generation_options(dev.config());
    o.num_beams = 3;
    o.num_return_sequences = 2;
    o.max_new_tokens = 6;
    o.no_repeat_ngram_size = 2;
    const locost::generation::token_rows rows = {std::vector<std::int64_t>(ids.begin(), ids.end())};
    const auto ed = dev.encode(ids.data(), nullptr, 1, static_cast<index_t>(ids.size()));
    const auto eh = host.encode(ids.data(), nullptr, 1, static_cast<index_t>(ids.size()));
    const auto rd = locost::generation::generate(dev, ed, rows, o);
    const auto rh = locost::generation::generate(host, eh, rows, o);
    CHECK(rd.sequences == rh.sequences);
    REQUIRE(rd.scores.size() == rh.scores.size());
    for (std::size_t i = 0; i < rd.scores.size(); ++i) CHECK(std::abs(rd.scores[i] - rh.scores[i]) < 1e-5);
}

// The GPU memory estimate (models/memory_estimate.hpp, device = cuda) says the model's own buffers
// live on the device; the emulated device counts what the model really holds there, so the
// estimate's model items are checked against it, phase by phase, for every family. The CUDA
// backend's own work areas (FFT groups, cuBLAS, attention partials) and the allocator's rounding are
// a GPU's alone: the emulated device runs the CPU's kernels, whose scratch is host memory.
namespace {
void check_gpu_estimate(const std::string& dir, locost::models::model_options o, index_t L) {
    const auto ck = locost::io::checkpoint::open(dir);
    const auto cfg = locost::models::read_config(ck);
    auto& arena = test::emulated_detail::arena::get();
    o.encoder.tile_rows = 4096;
    const index_t steps = 6;
    locost::models::memory_request r;
    r.length = L;
    r.decoder = true;
    r.decoder_positions = steps;
    r.device = locost::device_kind::cuda;
    const auto est = locost::models::estimate_memory(*cfg, o, r);
    auto model_items = [&](const std::string& phase) {
        for (const auto& p : est.phases)
            if (p.name == phase) {
                double sum = 0;
                for (const auto& item : p.items)
                    if (item.what != "FFT groups" && item.what != "allocator rounding (at most)" &&
                        item.what != "attention partials (at most)" && !locost::models::detail::library_workspace(item))
                        sum += item.bytes;
                return sum;
            }
        FAIL("no phase " << phase);
        return 0.0;
    };
    const std::size_t before = arena.live();
    auto held_since = [&] { return static_cast<double>(arena.peak() - before); };
    INFO(dir << ", L " << L << ", the estimate:\n" << est.table());
    {
        arena.reset_peak();
        auto m = locost::models::load_model<float, emulated>(ck, o);
        const double load_held = held_since(), weights = static_cast<double>(arena.live() - before);
        const auto ids = test::spread_ids(L, locost::models::common(*cfg).vocab_size);
        arena.reset_peak();
        auto e = m.encode(ids.data(), nullptr, 1, L);  // encoding and the cross-attention cache
        const double encode_held = held_since();
        arena.reset_peak();
        test::decode_greedily(m, e, steps);
        const double decode_held = held_since();
        const double encode_est = std::max(model_items("encode"), model_items("cache"));
        INFO("held on the device: load " << load_held << ", encode and cache " << encode_held << ", decode " << decode_held
                                         << "; the estimate's model items: load " << model_items("load") << ", encode/cache " << encode_est
                                         << ", decode " << model_items("decode"));
        CHECK(load_held <= model_items("load"));
        CHECK(weights >= 0.9 * model_items("load"));  // the weights are what loading leaves
        // Upper bounds, and tight ones.
        CHECK(encode_held <= encode_est);
        CHECK(encode_held >= 0.9 * encode_est);
        CHECK(decode_held <= model_items("decode"));
        CHECK(decode_held >= 0.9 * model_items("decode"));
    }
    CHECK(arena.live() == before);  // everything went back
    double device_only = 0;
    for (const auto& item : est.peak_phase().items)
        if (item.what == "FFT groups" || item.what == "attention partials (at most)" || locost::models::detail::library_workspace(item))
            device_only += item.bytes;
    CHECK(device_only > 96e6);  // cuBLAS and the partials at least
}
}  // namespace

TEST_CASE("emulated device: the GPU memory estimate bounds what each family holds on the device") {
    const std::string hf_dir = data_dir + "/hf";
    for (const index_t L : {2000, 20000}) check_gpu_estimate(tiny_dir, {}, L);
    for (const char* family : {"t5_v11", "longt5_local", "longt5_tglobal"}) check_gpu_estimate(hf_dir + "/" + family, {}, 2000);
    locost::models::model_options led;
    led.encoder.global_tokens = {0, 5, 50};
    check_gpu_estimate(hf_dir + "/led_g0", led, 512);
    check_gpu_estimate(hf_dir + "/pegasus_x", {}, 512);
    check_gpu_estimate(hf_dir + "/bart", {}, 128);
    locost::models::model_options sled;
    sled.sled = locost::models::sled_options{32, 0.5, 6, true, true, 0};
    check_gpu_estimate(hf_dir + "/t5_v11", sled, 2000);
    check_gpu_estimate(hf_dir + "/bart", sled, 2000);
}
