// locost inspect
#pragma once
#include <cstdio>
#include <iostream>
#include <map>

namespace locost::cli {

inline int run_inspect(const args& a) {
    const auto ck = io::checkpoint::open(a.required("model"));
    const auto& c = ck.config();
    const auto report = ck.validate();

    index_t params = 0;
    std::map<std::string, index_t> by_dtype;
    for (const auto& r : ck.records()) {
        params += r.shape.numel();
        by_dtype[std::string(safetensors_name(r.type))] += r.shape.numel();
    }
    auto list = [](const std::vector<std::string>& v) { return nlohmann::json(v); };

    if (a.flag("json")) {
        nlohmann::json j;
        j["model_dir"] = ck.dir();
        j["model_type"] = c.model_type;
        j["config"] = {{"vocab_size", c.vocab_size}, {"d_model", c.d_model}, {"d_state", c.d_state},
                       {"d_ff", c.d_ff}, {"d_kv", c.d_kv}, {"num_layers", c.num_layers},
                       {"num_decoder_layers", c.num_decoder_layers}, {"num_heads", c.num_heads},
                       {"num_ssm_heads", c.num_ssm_heads}, {"feed_forward_proj", c.feed_forward_proj},
                       {"bidirectional", c.bidirectional}, {"gating", c.gating},
                       {"tie_word_embeddings", c.tie_word_embeddings}, {"layer_norm_epsilon", c.layer_norm_epsilon},
                       {"pad_token_id", c.pad_token_id}, {"eos_token_id", c.eos_token_id},
                       {"decoder_start_token_id", c.decoder_start_token_id}};
        auto& t = j["tensors"] = nlohmann::json::array();
        for (const auto& r : ck.records())
            t.push_back({{"name", r.name}, {"dtype", safetensors_name(r.type)}, {"shape", r.shape}, {"file", r.source}});
        j["parameter_count"] = params;
        j["validation"] = {{"ok", report.ok()}, {"missing", list(report.missing)}, {"wrong_shape", list(report.wrong_shape)},
                           {"wrong_dtype", list(report.wrong_dtype)}, {"unexpected", list(report.unexpected)}};
        std::cout << j.dump(2) << "\n";
    } else {
        std::printf("checkpoint   %s\n", ck.dir().c_str());
        std::printf("model_type   %s\n", c.model_type.c_str());
        std::printf("dimensions   d_model %lld, d_state %lld, d_ff %lld, d_kv %lld, heads %lld, ssm heads %lld\n",
                    (long long)c.d_model, (long long)c.d_state, (long long)c.d_ff, (long long)c.d_kv,
                    (long long)c.num_heads, (long long)c.num_ssm_heads);
        std::printf("layers       encoder %lld, decoder %lld\n", (long long)c.num_layers, (long long)c.num_decoder_layers);
        std::printf("vocab        %lld (pad %lld, eos %lld, decoder start %lld)\n", (long long)c.vocab_size,
                    (long long)c.pad_token_id, (long long)c.eos_token_id, (long long)c.decoder_start_token_id);
        std::printf("feed-forward %s; bidirectional %s; gating %s; tied embeddings %s\n", c.feed_forward_proj.c_str(),
                    c.bidirectional ? "yes" : "no", c.gating ? "yes" : "no", c.tie_word_embeddings ? "yes" : "no");
        std::printf("\n%-72s %-5s %-22s %s\n", "tensor", "dtype", "shape", "file");
        for (const auto& r : ck.records())
            std::printf("%-72s %-5s %-22s %s\n", r.name.c_str(), std::string(safetensors_name(r.type)).c_str(),
                        r.shape.str().c_str(), r.source.c_str());
        std::printf("\nparameters   %lld", (long long)params);
        for (const auto& [d, n] : by_dtype) std::printf("  (%s: %lld)", d.c_str(), (long long)n);
        std::printf("\n");
        auto show = [](const char* what, const std::vector<std::string>& v) {
            for (const auto& s : v) std::printf("  %s: %s\n", what, s.c_str());
        };
        std::printf("validation   %s\n", report.ok() ? "OK: every tensor the config requires is present with its shape" : "FAILED");
        show("missing", report.missing);
        show("wrong shape", report.wrong_shape);
        show("wrong dtype", report.wrong_dtype);
        show("unexpected (ignored)", report.unexpected);
    }
    if (!report.ok()) {
        std::fprintf(stderr, "locost: [locost.checkpoint.invalid] %s: the checkpoint does not match its config (%zu missing, %zu wrong shape, %zu wrong dtype)\n",
                     ck.dir().c_str(), report.missing.size(), report.wrong_shape.size(), report.wrong_dtype.size());
        return 1;
    }
    return 0;
}

} // namespace locost::cli
