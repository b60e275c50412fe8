// locost inspect
#pragma once
#include <cstdio>
#include <iostream>
#include <map>

namespace locost::cli {

// The memory estimate (models/memory_estimate.hpp) of encode and of summarize with the
// checkpoint's generation defaults, for one document at each length; with --device cuda also the
// GPU memory the same requests take there.
struct inspect_estimate {
    index_t tokens;
    double encode, summarize;
    double gpu_encode = 0, gpu_summarize = 0;
};
inline std::vector<inspect_estimate> inspect_estimates(const io::checkpoint& ck, const models::any_config& c,
                                                       const std::vector<index_t>& lengths, const generation::generation_options& go,
                                                       std::string& generation, bool gpu) {
    models::model_options mo;
    mo.sled = models::read_sled_options(ck);
    generation = go.num_beams > 1 ? std::to_string(go.num_beams) + " beams" : std::string("greedy");
    generation += ", up to " + std::to_string(go.total_length() - 1) + " new tokens";
    std::vector<inspect_estimate> out;
    for (index_t L : lengths) {
        models::memory_request r;
        r.length = L;
        const double enc = models::estimate_memory(c, mo, r).peak();
        r.decoder = true;
        r.rows_per_document = go.num_beams;
        r.beam_search = go.num_beams > 1;
        r.decoder_positions = go.total_length() - 1;
        inspect_estimate e{L, enc, models::estimate_memory(c, mo, r).peak()};
        if (gpu) {
            r.device = device_kind::cuda;
            e.gpu_summarize = models::estimate_memory(c, mo, r).peak();
            r.decoder = false;
            e.gpu_encode = models::estimate_memory(c, mo, r).peak();
        }
        out.push_back(e);
    }
    return out;
}

// The files behind a tokenizer's path: a directory's in the order text::open_tokenizer looks for
// them (tokenizer.json, else vocab.json + merges.txt, else spiece.model), or the file itself.
inline std::string tokenizer_files_text(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) return path;
    const io::directory_files files(path);
    if (files.find("tokenizer.json")) return path + "/tokenizer.json";
    if (files.find("vocab.json") && files.find("merges.txt")) return path + "/vocab.json + merges.txt";
    if (files.find("spiece.model")) return path + "/spiece.model";
    return path;
}

inline nlohmann::json gpus_json(const std::vector<gpu_properties>& gpus) {
    auto out = nlohmann::json::array();
    for (const auto& g : gpus)
        out.push_back({{"device", "cuda:" + std::to_string(g.index)},
                       {"name", g.name},
                       {"compute_capability", std::to_string(g.compute_major) + "." + std::to_string(g.compute_minor)},
                       {"multiprocessors", g.multiprocessors},
                       {"free_bytes", g.free_bytes},
                       {"total_bytes", g.total_bytes}});
    return out;
}

// inspect --system: the CPU, which float32 GEMM runs and why, each provider's kernel, and a short
// measurement of each beside the machine's FMA peak (about 1.5 s in all).
inline int run_inspect_system(const args& a) {
    const int threads = a.integer<int>("threads", 0, 0, 1024);
    set_num_threads(threads);
    const auto cpu = runtime::describe_cpu();
    const auto machine = machine_isa();
    const auto chosen = float32_gemm();
    const auto kernels = kernels_isa();
    const index_t m = 1024, k = 768, n = 2048;  // an encoder tile through a feed-forward's first layer
    const double peak = runtime::measure_fma_peak(num_threads(), 0.3);
    struct measured {
        gemm_candidate c;
        double gflops;
    };
    std::vector<measured> providers;
    for (const auto& c : gemm_candidates()) {
        set_float32_gemm(c.provider);
        providers.push_back({c, runtime::measure_gemm(m, k, n, 0.3)});
    }
    set_float32_gemm(std::nullopt);
    std::vector<std::pair<std::string, std::string>> env;
    for (const char* v : {"LOCOST_GEMM", "LOCOST_ISA", "OPENBLAS_CORETYPE", "DNNL_MAX_CPU_ISA", "OMP_NUM_THREADS"})
        if (const char* x = std::getenv(v)) env.emplace_back(v, x);
    const std::string lanes_isa = runtime::widest_fma_chains().name;
    if (a.flag("json")) {
        nlohmann::json j;
        j["cpu"] = {{"name", cpu.name},
                    {"family", cpu.family},
                    {"model", cpu.model},
                    {"features", cpu.features},
                    {"widest_isa", isa_name(machine)}};
        j["threads"] = num_threads();
        j["kernels"] = {{"level", isa_level_name(kernels)},
                        {"cpu_level", isa_level_name(cpu_isa())},
                        {"compiled_level", isa_level_name(compiled_isa_level())}};
        j["float32_gemm"] = {{"provider", provider_name(chosen.provider)},
                             {"kernel", chosen.kernel},
                             {"isa", isa_name(chosen.isa)},
                             {"description", chosen.describe()},
                             {"reason", chosen.reason}};
        j["fma_peak_gflops"] = peak;
        j["fma_peak_vector"] = lanes_isa;
        j["gemm_shape"] = {m, k, n};
        auto& jp = j["providers"] = nlohmann::json::array();
        for (const auto& p : providers)
            jp.push_back({{"provider", provider_name(p.c.provider)},
                          {"kernel", p.c.kernel},
                          {"isa", isa_name(p.c.isa)},
                          {"gflops", p.gflops},
                          {"share_of_peak", p.gflops / peak},
                          {"in_force", p.c.provider == chosen.provider}});
        auto& je = j["environment"] = nlohmann::json::object();
        for (const auto& [k2, v] : env) je[k2] = v;
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    std::printf("cpu          %s", cpu.name.c_str());
    if (cpu.family >= 0) std::printf(" (family %d, model %d)", cpu.family, cpu.model);
    std::printf("\nfeatures    ");
    for (const auto& f : cpu.features) std::printf(" %s", f.c_str());
    std::printf("\nwidest ISA   %s\nthreads      %d\n", isa_name(machine), num_threads());
    for (const auto& [k2, v] : env) std::printf("environment  %s=%s\n", k2.c_str(), v.c_str());
    std::printf("kernels      %s (this CPU: %s; this build compiled for %s)\n", std::string(isa_level_name(kernels)).c_str(),
                std::string(isa_level_name(cpu_isa())).c_str(), std::string(isa_level_name(compiled_isa_level())).c_str());
    std::printf("float32 GEMM %s: %s\n", chosen.describe().c_str(), chosen.reason.c_str());
    std::printf("\nmeasured (y = x (%lld x %lld) times W (%lld x %lld) transposed, %d thread%s)\n", static_cast<long long>(m),
                static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(k), num_threads(),
                num_threads() == 1 ? "" : "s");
    std::printf("  %-10s %-32s %8.0f GFLOP/s\n", "FMA peak", ("FMA chains, " + lanes_isa).c_str(), peak);
    for (const auto& p : providers)
        std::printf("  %-10s %-32s %8.0f GFLOP/s  %3.0f %% of peak%s\n", provider_name(p.c.provider),
                    (p.c.kernel + " (" + isa_name(p.c.isa) + ")").c_str(), p.gflops, 100.0 * p.gflops / peak,
                    p.c.provider == chosen.provider ? "  <- in force" : "");
    return 0;
}

inline int run_inspect(const args& a) {
    if (a.flag("system")) {
        for (const char* o : {"model", "backbone", "cache-dir", "device", "tokenizer", "generation-config", "task"})
            if (a.has(o))
                throw error("cli.bad_value",
                            std::string("inspect: option '--") + o +
                                "' does not go with --system (which shows the machine, not a checkpoint)");
        return run_inspect_system(a);
    }
    if (a.has("threads")) throw error("cli.bad_value", "inspect: option '--threads' goes with --system only");
    // --device cuda: the GPUs first (an error when there are none), then the checkpoint if given.
    std::vector<gpu_properties> gpus;
    if (read_device(a, "inspect") == device_kind::cuda) {
        gpus = cuda_devices();
        if (!a.has("model")) {
            if (a.flag("json")) std::cout << nlohmann::json{{"devices", gpus_json(gpus)}}.dump(2) << "\n";
            else
                for (const auto& g : gpus) std::printf("device       %s\n", describe(g).c_str());
            return 0;
        }
    }
    const auto ck = open_checkpoint(a);
    const auto family_cfg = models::read_config(ck);
    const auto& c = models::common(*family_cfg);
    models::check_layers_fit(c, ck.records().size(), ck.weights_path());
    const auto report = ck.validate(models::expected_parameters(*family_cfg));
    const auto keys = models::describe(*family_cfg);
    const auto sled = models::read_sled_options(ck);

    index_t params = 0;
    std::map<std::string, index_t> by_dtype;
    for (const auto& r : ck.records()) {
        params += r.shape.numel();
        by_dtype[std::string(safetensors_name(r.type))] += r.shape.numel();
    }
    auto list = [](const std::vector<std::string>& v) { return nlohmann::json(v); };
    std::string generation;
    const std::vector<index_t> lengths = {4096, 65536, 1048576};
    // The generation settings generate and summarize would use (with --generation-config and
    // --task as they take them), each with its source.
    const auto defaults = read_generation_defaults(a, ck, "inspect");
    const auto go = read_generation_options(a, "inspect", *family_cfg, defaults.config);
    const auto settings = generation_settings(a, go, defaults.file, defaults.given, defaults.from_task);
    // The tokenizer summarize would use; a repository may ship none (google/pegasus-x-base-arxiv).
    std::optional<text::tokenizer> tok;
    std::string no_tokenizer;
    try {
        tok.emplace(open_tokenizer(a, ck, "inspect"));
    } catch (const error& e) {
        if (e.id() != "cli.missing_option") throw;
        no_tokenizer = "none in " + ck.dir() + ": text commands need --tokenizer SPM|DIR|ORG/NAME";
    }
    const auto estimates =
        report.ok() ? inspect_estimates(ck, *family_cfg, lengths, go, generation, !gpus.empty()) : std::vector<inspect_estimate>{};

    if (a.flag("json")) {
        nlohmann::json j;
        if (!gpus.empty()) j["devices"] = gpus_json(gpus);
        j["model_dir"] = ck.dir();
        j["model_type"] = c.model_type;
        auto& jc = j["config"] = nlohmann::json::object();
        for (const auto& [k, v] : keys) jc[k] = v;
        if (sled)
            j["sled"] = {{"context_size", sled->context_size},
                         {"window_fraction", sled->window_fraction},
                         {"prepend_prefix", sled->prepend_prefix},
                         {"encode_prefix", sled->encode_prefix}};
        j["tokenizer"] = tok
            ? nlohmann::json{{"path", tok->path()}, {"files", tokenizer_files_text(tok->path())}, {"vocab_size", tok->vocab_size()}}
            : nlohmann::json(nullptr);
        auto& js = j["generation"] = {{"source", defaults.source}, {"prefix", defaults.prefix}, {"settings", nlohmann::json::array()}};
        for (const auto& g : settings) js["settings"].push_back({{"name", g.name}, {"value", g.value}, {"source", g.source}});
        auto& t = j["tensors"] = nlohmann::json::array();
        for (const auto& r : ck.records())
            t.push_back({{"name", r.name}, {"dtype", safetensors_name(r.type)}, {"shape", r.shape}, {"file", r.source}});
        j["parameter_count"] = params;
        j["validation"] = {{"ok", report.ok()},
                           {"missing", list(report.missing)},
                           {"wrong_shape", list(report.wrong_shape)},
                           {"wrong_dtype", list(report.wrong_dtype)},
                           {"unexpected", list(report.unexpected)}};
        if (report.ok()) {
            auto& m = j["memory_estimate"] = {
                {"threads", num_threads()}, {"summarize_generation", generation}, {"lengths", nlohmann::json::array()}};
            for (const auto& e : estimates) {
                m["lengths"].push_back({{"tokens", e.tokens}, {"encode_bytes", e.encode}, {"summarize_bytes", e.summarize}});
                if (!gpus.empty()) {
                    m["lengths"].back()["gpu_encode_bytes"] = e.gpu_encode;
                    m["lengths"].back()["gpu_summarize_bytes"] = e.gpu_summarize;
                }
            }
        }
        std::cout << j.dump(2) << "\n";
    } else {
        for (const auto& g : gpus) std::printf("device       %s\n", describe(g).c_str());
        std::printf("checkpoint   %s\n", ck.dir().c_str());
        std::printf("model_type   %s\n", c.model_type.c_str());
        for (const auto& [k, v] : keys)
            std::printf("  %-32s %s\n", k.c_str(), v.is_string() ? v.get<std::string>().c_str() : v.dump().c_str());
        if (sled)
            std::printf("SLED         context %lld, window fraction %g, prepend prefix %s, encode prefix %s\n",
                        (long long)sled->context_size, sled->window_fraction, sled->prepend_prefix ? "yes" : "no",
                        sled->encode_prefix ? "yes" : "no");
        if (tok)
            std::printf("tokenizer    %s (vocabulary %lld)\n", tokenizer_files_text(tok->path()).c_str(),
                        static_cast<long long>(tok->vocab_size()));
        else std::printf("tokenizer    %s\n", no_tokenizer.c_str());
        if (!defaults.prefix.empty())
            std::printf("prefix       %s (summarize puts it before the text)\n", nlohmann::json(defaults.prefix).dump().c_str());
        std::printf("\n");
        for (const auto& g : settings) std::printf("generation %s %s (%s)\n", g.name.c_str(), g.value.c_str(), g.source.c_str());
        std::printf("\n%-72s %-5s %-22s %s\n", "tensor", "dtype", "shape", "file");
        for (const auto& r : ck.records())
            std::printf("%-72s %-5s %-22s %s\n", r.name.c_str(), std::string(safetensors_name(r.type)).c_str(), r.shape.str().c_str(),
                        r.source.c_str());
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
        if (report.ok()) {
            std::printf("\nmemory estimate, one document (float32 compute, %d threads; summarize: %s):\n", num_threads(),
                        generation.c_str());
            std::printf("  %10s  %10s  %10s\n", "tokens", "encode", "summarize");
            for (const auto& e : estimates)
                std::printf("  %10lld  %10s  %10s\n", static_cast<long long>(e.tokens), models::format_bytes(e.encode).c_str(),
                            models::format_bytes(e.summarize).c_str());
            if (!gpus.empty()) {
                std::printf("\nGPU memory estimate, one document (--device cuda, float32 compute):\n");
                std::printf("  %10s  %10s  %10s\n", "tokens", "encode", "summarize");
                for (const auto& e : estimates)
                    std::printf("  %10lld  %10s  %10s\n", static_cast<long long>(e.tokens), models::format_bytes(e.gpu_encode).c_str(),
                                models::format_bytes(e.gpu_summarize).c_str());
            }
        }
    }
    if (!report.ok()) {
        std::fprintf(
            stderr,
            "locost: [locost.checkpoint.invalid] %s: the checkpoint does not match its config (%zu missing, %zu wrong shape, %zu wrong dtype)\n",
            ck.dir().c_str(), report.missing.size(), report.wrong_shape.size(), report.wrong_dtype.size());
        return 1;
    }
    return 0;
}

}  // namespace locost::cli
