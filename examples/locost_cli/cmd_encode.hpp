// locost encode
#pragma once
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "progress.hpp"

namespace locost::cli {

inline std::string read_text_input(const std::string& path, const char* option) {
    if (path == "-") {
        std::ostringstream s;
        s << std::cin.rdbuf();
        return s.str();
    }
    std::ifstream f(path, std::ios::binary);
    if (!f) throw error("io.open_failed", path + ": cannot open (" + option + ")");
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// Token ids of the command's input (--ids or --input), padded into a (B, L) batch with its mask.
struct encoder_input {
    tensor<std::int64_t> ids;   // (B, L)
    tensor<float> mask;         // (B, L): 1 valid, 0 padding
    std::vector<index_t> lengths;
};

inline encoder_input read_encoder_input(const args& a, const io::checkpoint& ck) {
    const auto& cfg = ck.config();
    std::vector<std::vector<std::int64_t>> rows;
    if (a.has("ids") == a.has("input"))
        throw error("cli.missing_option", std::string(a.has("ids") ? "encode: give either '--ids' or '--input', not both"
                                                                     : "encode: option '--ids' or '--input' is required (see 'locost encode --help')"));
    if (a.has("ids")) {
        const std::string path = a.required("ids");
        const auto batch = io::parse_ids_json(read_text_input(path, "--ids"), path);
        io::check_ids_vocab(batch, cfg.vocab_size, path);
        rows = batch.rows;
    } else {
        namespace fs = std::filesystem;
        std::string spm = a.get("tokenizer", (fs::path(ck.dir()) / "spiece.model").string());
        if (!a.has("tokenizer") && !fs::exists(spm))
            throw error("cli.missing_option", "encode: " + ck.dir() + " holds no spiece.model; pass '--tokenizer SPM'");
        text::tokenizer tok(spm);
        const auto ids = tok.encode(read_text_input(a.required("input"), "--input"));
        rows.emplace_back(ids.begin(), ids.end());
        io::check_ids_vocab(io::id_batch{rows, true}, cfg.vocab_size, spm);
    }
    index_t L = 0;
    for (const auto& r : rows) L = std::max<index_t>(L, static_cast<index_t>(r.size()));
    const index_t B = static_cast<index_t>(rows.size());
    encoder_input in{tensor<std::int64_t>({B, L}, cfg.pad_token_id), tensor<float>({B, L}, 0.0f), {}};
    for (index_t b = 0; b < B; ++b) {
        for (index_t l = 0; l < static_cast<index_t>(rows[b].size()); ++l) {
            in.ids[b * L + l] = rows[b][l];
            in.mask[b * L + l] = 1.0f;
        }
        in.lengths.push_back(static_cast<index_t>(rows[b].size()));
    }
    return in;
}

inline int run_encode(const args& a) {
    const int threads = a.integer<int>("threads", 0, 0, 1024);
    const std::string out = a.required("out");
    if (threads > 0) set_num_threads(threads);
    const auto ck = io::checkpoint::open(a.required("model"));
    const auto in = read_encoder_input(a, ck);
    const index_t B = in.ids.dim(0), L = in.ids.dim(1);

    progress_display progress(a.flag("progress"), "encode");
    auto encoder = models::load_locost_encoder<cpu>(ck);
    tensor<float> h = encoder.encode(in.ids.data(), in.mask.data(), B, L, [&](const models::encode_progress& p) {
        progress.update(static_cast<double>(p.layer) + static_cast<double>(p.tokens_done) / static_cast<double>(p.tokens),
                        static_cast<double>(p.layers), "layer " + std::to_string(p.layer + 1) + "/" + std::to_string(p.layers));
    });
    progress.finish();
    const double secs = progress.seconds();

    io::safetensors_writer w;
    w.add("last_hidden_state", h.v());
    w.metadata["locost_command"] = "encode";
    w.metadata["model"] = ck.dir();
    w.write(out);
    std::fprintf(stderr, "encoded %lld x %lld tokens in %.2f s: %.0f tokens/s, peak memory %.2f GB\n",
                 static_cast<long long>(B), static_cast<long long>(L), secs,
                 static_cast<double>(B * L) / std::max(secs, 1e-9), static_cast<double>(peak_rss_bytes()) / 1e9);
    return 0;
}

} // namespace locost::cli
