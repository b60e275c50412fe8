// locost encode
#pragma once
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "budget.hpp"
#include "gen_flags.hpp"
#include "input.hpp"
#include "progress.hpp"

namespace locost::cli {

inline batch_input read_encoder_input(const args& a, const io::checkpoint& ck, const models::model_config& cfg) {
    if (a.has("ids") == a.has("input"))
        throw error("cli.missing_option",
                    std::string(a.has("ids") ? "encode: give either '--ids' or '--input', not both"
                                             : "encode: option '--ids' or '--input' is required (see 'locost encode --help')"));
    if (a.has("ids"))
        return make_cut_batch(a, read_ids_file(a.required("ids"), cfg.vocab_size).rows, cfg, 0, "encode: " + a.required("ids"));
    const auto tok = open_tokenizer(a, ck, "encode");
    return make_cut_batch(a, {read_text_ids(a, "encode", cfg.vocab_size, tok)}, cfg, 0, "encode");
}

// The encoder states on the host and the seconds spent loading the weights, which the closing
// line reports apart from the encode (as generate and summarize do).
struct encode_result {
    tensor<float> states;
    double load_s = 0;
};

// The encoder run on Backend.
template <class Backend>
encode_result encode_on(const io::checkpoint& ck, const models::model_options& opts, const batch_input& in,
                        const models::progress_callback& progress) {
    const auto t0 = std::chrono::steady_clock::now();
    auto encoder = [&] {
        const phase_scope phase("loading the weights");
        return models::load_encoder<float, Backend>(ck, opts);
    }();
    encode_result r;
    r.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const phase_scope phase("encoding");
    r.states = host_tensor(encoder.forward(in.ids.data(), in.mask.data(), in.B, in.L, progress));
    return r;
}
// The same on the GPU: cuda_device.cpp instantiates encode_on<locost::cuda> in a tool built with
// the CUDA backend; no_cuda.cpp reports device.no_cuda_build otherwise.
encode_result encode_on_cuda(const io::checkpoint& ck, const models::model_options& opts, const batch_input& in,
                             const models::progress_callback& progress);

inline int run_encode(const args& a) {
    const std::string out = checked_output(a, "encode");
    const auto ck = open_checkpoint(a);
    const auto opts = read_model_options(a, "encode", ck);
    const auto cfg = models::read_config(ck);
    models::require_matching_weights(ck, *cfg);
    const auto in = read_encoder_input(a, ck, models::common(*cfg));
    const index_t B = in.B, L = in.L;
    if (check_memory(a, "encode", ck, *cfg, opts, batch_request(in))) return 0;

    progress_display progress(a.flag("progress"), "encode");
    const bool gpu = read_device(a, "encode") == device_kind::cuda;
    encode_result r =
        gpu ? encode_on_cuda(ck, opts, in, encode_progress(progress)) : encode_on<cpu>(ck, opts, in, encode_progress(progress));
    progress.finish();
    const double secs = std::max(progress.seconds() - r.load_s, 0.0);  // the encoder's forward alone
    const tensor<float>& h = r.states;

    io::safetensors_writer w;
    w.add_borrowed("last_hidden_state", h.v());
    w.metadata["locost_command"] = "encode";
    w.metadata["model"] = ck.dir();
    w.write(out);
    // "encoded B x L tokens in S s: R tokens/s, peak memory M GB; weights loaded in W s[; float32
    // GEMM ...]": S and R are the encode alone (bench/peers/compare_*.py read them).
    std::fprintf(stderr, "encoded %lld x %lld tokens in %.2f s: %.0f tokens/s, peak memory %.2f GB; weights loaded in %.2f s%s\n",
                 static_cast<long long>(B), static_cast<long long>(L), secs, static_cast<double>(B * L) / std::max(secs, 1e-9),
                 static_cast<double>(peak_rss_bytes()) / 1e9, r.load_s, gemm_note(a, "encode").c_str());
    return 0;
}

}  // namespace locost::cli
