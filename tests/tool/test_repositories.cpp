// Checkpoints by name from the Hugging Face cache (io/hub_cache.hpp) and repositories as
// published, file for file, through every command that reads a model: inspect, tokenize, generate
// and summarize, by path and by cache name.
#include "tool/cli.hpp"

TEST_CASE("cli: models by name from the Hugging Face cache, and a SLED repository that ships only its config (tau/bart-base-sled)") {
    const std::string hf = data + "/hf";
    const fs::path cache = fs::path(LOCOST_TEST_TMP) / "cli-hub-cache";
    fs::remove_all(cache);
    // huggingface_hub's layout: refs/main names the commit; the snapshot's files link into blobs/.
    auto add_repo = [&](const std::string& folder, const std::string& commit,
                        const std::vector<std::pair<std::string, std::string>>& files) {
        const fs::path repo = cache / folder, snap = repo / "snapshots" / commit;
        fs::create_directories(snap);
        fs::create_directories(repo / "blobs");
        fs::create_directories(repo / "refs");
        std::ofstream(repo / "refs" / "main") << commit;
        for (const auto& [name, source] : files) {
            fs::copy_file(source, repo / "blobs" / ("blob-" + name));
            fs::create_symlink(fs::path("../../blobs") / ("blob-" + name), snap / name);
        }
        return snap.string();
    };
    const std::string bart = add_repo("models--facebook--bart-base", "1111111111111111111111111111111111111111",
                                      {{"config.json", hf + "/bart/config.json"},
                                       {"generation_config.json", hf + "/bart/generation_config.json"},
                                       {"model.safetensors", hf + "/bart/model.safetensors"},
                                       {"vocab.json", hf + "/bart/vocab.json"},
                                       {"merges.txt", hf + "/bart/merges.txt"}});
    const fs::path sled_files = fs::path(LOCOST_TEST_TMP) / "cli-hub-sled-files";
    fs::create_directories(sled_files);
    std::ofstream(sled_files / "config.json")
        << R"({"model_type": "tau/sled", "underlying_config": "facebook/bart-base", "context_size": 32,
        "window_fraction": 0.5, "prepend_prefix": true, "encode_prefix": true, "sliding_method": "dynamic"})";
    std::ofstream(sled_files / "tokenizer_config.json")
        << R"({"tokenizer_class": "SledTokenizer", "base_tokenizer": "facebook/bart-base"})";
    add_repo("models--tau--bart-base-sled", "2222222222222222222222222222222222222222",
             {{"config.json", (sled_files / "config.json").string()},
              {"tokenizer_config.json", (sled_files / "tokenizer_config.json").string()}});
    setenv("HF_HUB_CACHE", cache.c_str(), 1);

    const std::string text = (fs::path(LOCOST_TEST_TMP) / "cli-hub-text.txt").string();
    std::ofstream(text)
        << "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.";
    // By name, the tokenizer and the model are the directory's.
    auto by_dir = run_tool("tokenize --model " + hf + "/bart --input " + text);
    REQUIRE(by_dir.rc == 0);
    auto r = run_tool("tokenize --model facebook/bart-base --input " + text);
    CHECK(r.rc == 0);
    CHECK(r.out == by_dir.out);
    r = run_tool("tokenize --model tau/bart-base-sled --input " + text);  // the backbone's tokenizer
    CHECK(r.rc == 0);
    CHECK(r.out == by_dir.out);
    r = run_tool("inspect --model tau/bart-base-sled");
    CHECK(r.rc == 0);

    // Generation through the SLED repository equals the backbone with the same SLED flags (which
    // the test above checks against transformers' SLED outputs).
    const std::string ids = json_file("hub-ids", nlohmann::json::parse(by_dir.out));
    const auto flags =
        run_tool("generate --model " + hf + "/bart --ids " + ids + " --sled-context 32 --sled-window-fraction 0.5 --max-new-tokens 6");
    REQUIRE(flags.rc == 0);
    r = run_tool("generate --model tau/bart-base-sled --ids " + ids + " --max-new-tokens 6");
    CHECK(r.rc == 0);
    CHECK(r.out == flags.out);
    r = run_tool("generate --model tau/bart-base-sled@main --backbone " + bart + " --ids " + ids + " --max-new-tokens 6");
    CHECK(r.rc == 0);
    CHECK(r.out == flags.out);

    // The backbone is not in the cache: the error says where it looked and how to get it.
    fs::rename(cache / "models--facebook--bart-base", cache / "models--elsewhere--bart-base");
    r = run_tool("generate --model tau/bart-base-sled --ids " + ids);
    CHECK(r.rc == 1);
    const std::string snapshot =
        (cache / "models--tau--bart-base-sled" / "snapshots" / "2222222222222222222222222222222222222222").string();
    CHECK(r.err ==
          "locost: [locost.sled.backbone_not_found] " + snapshot +
              "/config.json: underlying_config 'facebook/bart-base' names the backbone "
              "facebook/bart-base: no such directory, and not in the Hugging Face cache (looked for " +
              (cache / "models--facebook--bart-base").string() +
              "; the cache is $HF_HUB_CACHE). locost never downloads: where there is network, run `hf download facebook/bart-base` "
              "(huggingface_hub) and copy models--facebook--bart-base into " +
              cache.string() + " here, or give the checkpoint's directory\n");
    r = run_tool("generate --model tau/bart-base-sled --backbone " +
                 (cache / "models--elsewhere--bart-base" / "snapshots" / "1111111111111111111111111111111111111111").string() + " --ids " +
                 ids + " --max-new-tokens 6");
    CHECK(r.rc == 0);
    CHECK(r.out == flags.out);
    r = run_tool("tokenize --model google/absent --input " + text);
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.checkpoint.not_in_cache] google/absent: no such directory, and not in the Hugging Face cache (looked for " +
              (cache / "models--google--absent").string() +
              "; the cache is $HF_HUB_CACHE). locost never downloads: where there is network, run "
              "`hf download google/absent` (huggingface_hub) and copy models--google--absent into " +
              cache.string() + " here, or give the checkpoint's directory\n");

    // --cache-dir (from_pretrained's cache_dir) in place of the environment's cache, for the
    // checkpoint and for what it names: the SLED repository's backbone, weights and tokenizer.
    fs::rename(cache / "models--elsewhere--bart-base", cache / "models--facebook--bart-base");
    const fs::path empty_cache = fs::path(LOCOST_TEST_TMP) / "cli-hub-empty-cache";
    fs::create_directories(empty_cache);
    setenv("HF_HUB_CACHE", empty_cache.c_str(), 1);
    const std::string given = " --cache-dir " + cache.string();
    r = run_tool("tokenize --model tau/bart-base-sled --input " + text + given);
    CHECK(r.rc == 0);
    CHECK(r.out == by_dir.out);
    r = run_tool("detokenize --model facebook/bart-base --ids " + ids + given);
    CHECK(r.rc == 0);
    r = run_tool("inspect --model tau/bart-base-sled" + given);
    CHECK(r.rc == 0);
    r = run_tool("generate --model tau/bart-base-sled --ids " + ids + " --max-new-tokens 6" + given);
    CHECK(r.rc == 0);
    CHECK(r.out == flags.out);
    r = run_tool("summarize --model facebook/bart-base --tokenizer facebook/bart-base --input " + text + " --max-new-tokens 4" + given);
    CHECK(r.rc == 0);
    r = run_tool("generate --model tau/bart-base-sled --ids " + ids + " --max-new-tokens 6");  // the environment's cache is empty
    CHECK(r.rc == 1);
    CHECK(r.err.find("locost: [locost.checkpoint.not_in_cache] tau/bart-base-sled: no such directory") == 0);
    r = run_tool("tokenize --model google/absent --input " + text + given);
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.checkpoint.not_in_cache] google/absent: no such directory, and not in the Hugging Face cache (looked for " +
              (cache / "models--google--absent").string() + "; the cache is " + cache.string() +
              " (--cache-dir)). locost never downloads: where there is network, run "
              "`hf download google/absent` (huggingface_hub) and copy models--google--absent into " +
              cache.string() + " here, or give the checkpoint's directory\n");
    r = run_tool("tokenize --model facebook/bart-base --input " + text + " --cache-dir " + cache.string() + "-typo");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.checkpoint.not_in_cache] facebook/bart-base: --cache-dir '" + cache.string() + "-typo' is not a directory\n");
    unsetenv("HF_HUB_CACHE");
}

namespace {

// pytorch_model.bin as torch.save writes it, from a safetensors file's float32 tensors: a zip of
// stored entries under "archive/" (data.pkl; data/<key>, one storage per tensor, each aligned to
// 64 bytes by an extra field as torch pads them; version), data.pkl a protocol-2 pickle of an
// OrderedDict of _rebuild_tensor_v2 calls. `half`: torch.HalfStorage (facebook/bart-large).
void write_torch_bin(const fs::path& from, const fs::path& to, bool half) {
    const auto st = locost::io::safetensors_file::open(from.string());
    auto le = [](std::string& s, std::uint64_t v, int bytes) {
        for (int k = 0; k < bytes; ++k) s += static_cast<char>((v >> (8 * k)) & 0xFF);
    };
    std::string pkl = "\x80\x02";  // PROTO 2
    auto str = [&](const std::string& s) {
        pkl += 'X';
        le(pkl, s.size(), 4);
        pkl += s;
    };  // BINUNICODE
    auto global = [&](const std::string& module, const std::string& name) { pkl += 'c' + module + "\n" + name + "\n"; };
    auto integer = [&](std::uint64_t v) {
        pkl += 'J';
        le(pkl, v, 4);
    };  // BININT
    auto ordered_dict = [&] {
        global("collections", "OrderedDict");
        pkl += ")R";
    };                                                         // EMPTY_TUPLE REDUCE
    std::vector<std::pair<std::string, std::string>> entries;  // name, bytes
    ordered_dict();
    pkl += '(';  // MARK: the items
    for (const auto& r : st.records()) {
        REQUIRE(r.type == locost::dtype::f32);
        const std::string key = std::to_string(entries.size());
        std::string bytes;
        const index_t n = r.shape.numel();
        for (index_t i = 0; i < n; ++i) {
            float x;
            std::memcpy(&x, r.bytes + 4 * i, 4);
            if (half) le(bytes, locost::float_to_f16(x), 2);
            else {
                std::uint32_t u;
                std::memcpy(&u, &x, 4);
                le(bytes, u, 4);
            }
        }
        entries.emplace_back("archive/data/" + key, std::move(bytes));
        str(r.name);
        global("torch._utils", "_rebuild_tensor_v2");
        pkl += "((";  // MARK the arguments, MARK the persistent id
        str("storage");
        global("torch", half ? "HalfStorage" : "FloatStorage");
        str(key);
        str("cpu");
        integer(static_cast<std::uint64_t>(n));
        pkl += "tQ";  // TUPLE BINPERSID
        integer(0);   // storage offset
        pkl += '(';
        for (std::size_t d = 0; d < r.shape.size(); ++d) integer(static_cast<std::uint64_t>(r.shape[d]));
        pkl += "t(";
        index_t stride = 1;
        std::vector<index_t> strides(r.shape.size());
        for (std::size_t d = r.shape.size(); d-- > 0;) {
            strides[d] = stride;
            stride *= r.shape[d];
        }
        for (auto s : strides) integer(static_cast<std::uint64_t>(s));
        pkl += "t\x89";  // TUPLE NEWFALSE (requires_grad)
        ordered_dict();  // backward hooks
        pkl += "tR";
    }
    pkl += "u.";  // SETITEMS STOP
    entries.insert(entries.begin(), {"archive/data.pkl", pkl});
    entries.emplace_back("archive/version", "3\n");

    std::uint32_t table[256];
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    auto crc32 = [&](const std::string& s) {
        std::uint32_t c = 0xFFFFFFFFu;
        for (unsigned char b : s) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
        return c ^ 0xFFFFFFFFu;
    };
    std::string zip, central;
    for (const auto& [name, bytes] : entries) {
        const std::uint64_t offset = zip.size();
        const std::size_t unpadded = zip.size() + 30 + name.size() + 4;
        const std::size_t pad = (64 - unpadded % 64) % 64;
        const std::uint32_t crc = crc32(bytes);
        zip += "PK\x03\x04";
        le(zip, 20, 2), le(zip, 0, 2), le(zip, 0, 2), le(zip, 0, 2), le(zip, 0, 2);  // version, flags, stored, time, date
        le(zip, crc, 4), le(zip, bytes.size(), 4), le(zip, bytes.size(), 4);
        le(zip, name.size(), 2), le(zip, 4 + pad, 2);
        zip += name;
        le(zip, 0x4246, 2), le(zip, pad, 2);  // "FB": torch's padding field
        zip += std::string(pad, 'Z');
        zip += bytes;
        central += "PK\x01\x02";
        le(central, 20, 2), le(central, 20, 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 2);
        le(central, crc, 4), le(central, bytes.size(), 4), le(central, bytes.size(), 4);
        le(central, name.size(), 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 4);
        le(central, offset, 4);
        central += name;
    }
    const std::uint64_t cd_offset = zip.size();
    zip += central;
    zip += "PK\x05\x06";
    le(zip, 0, 2), le(zip, 0, 2), le(zip, entries.size(), 2), le(zip, entries.size(), 2);
    le(zip, central.size(), 4), le(zip, cd_offset, 4), le(zip, 0, 2);
    std::ofstream(to, std::ios::binary) << zip;
}

// One repository as published: which weight file, which tokenizer files, where its generation
// settings live — made from a demo checkpoint of the family (UNTRAINED weights).
struct repository_layout {
    std::string repo;                    // ORG/NAME
    std::string demo;                    // the demo checkpoint it is made from
    std::vector<std::string> weights;    // model.safetensors, pytorch_model.bin, pytorch_model.bin:f16
    std::vector<std::string> tokenizer;  // spiece.model, tokenizer.json:LAYOUT, vocab.json, merges.txt, NAME.json:{json}
    nlohmann::json config;               // fields over the demo's config.json (null: removed); "replace" replaces it
    std::vector<std::pair<std::string, nlohmann::json>> files;  // other JSON files (generation_config.json, ...)
    std::string options;                                        // options the repository needs (--task)
    std::string tokenizer_by_path;     // the tokenizer it needs (it ships none), by path / by name: for inspect and summarize,
    std::string tokenizer_by_name;     // and as tokenize's --model
    std::string same_as;               // options that give the demo checkpoint the same settings
    std::string prefix;                // the text summarize puts before the document
    std::vector<std::string> inspect;  // lines inspect must print
    std::string tokenizer_file;        // the file inspect must name (relative to the directory)
    // Options for every run of it and of its demo checkpoint: untrained BART and LED stop at once,
    // so whether the settings apply shows only when a minimum length keeps them going.
    std::string run_options = "";
};

}  // namespace

TEST_CASE(
    "cli: repositories as published, file for file (tiny UNTRAINED weights): inspect, tokenize, generate and summarize, by path and by cache name") {
    const fs::path root = fs::path(LOCOST_TEST_TMP) / "cli-layouts";
    fs::remove_all(root);
    fs::create_directories(root);
    const std::string bpe = data + "/hf/bpe", tj = data + "/tokenizer_json";
    // The demo checkpoints every layout is made from (their tokenizers are the ones tokenizer.json
    // files under tests/data/tokenizer_json were written from).
    const std::map<std::string, std::string> demo_flags = {{"t5", "--family t5"},
                                                           {"longt5", "--family longt5"},
                                                           {"led", "--family led --bpe " + bpe},
                                                           {"bart", "--family bart --bpe " + bpe},
                                                           {"pegasus_x", "--family pegasus_x"}};
    std::map<std::string, std::string> demos;
    for (const auto& [name, flags] : demo_flags) {
        demos[name] = (root / ("demo-" + name)).string();
        REQUIRE(run_tool("demo-checkpoint " + flags + " --config tiny --seed 5 --out " + demos[name]).rc == 0);
    }
    // transformers 5's T5Tokenizer layout: no normalizer, WhitespaceSplit then Metaspace.
    const fs::path t5_v5 = root / "t5_v5.json";
    {
        auto j = nlohmann::json::parse(slurp(tj + "/t5_v4/tokenizer.json"));
        const nlohmann::json metaspace = {
            {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
        j["normalizer"] = nullptr;
        j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", nlohmann::json::array({{{"type", "WhitespaceSplit"}}, metaspace})}};
        j["decoder"] = metaspace;
        std::ofstream(t5_v5) << j.dump();
    }
    const nlohmann::json t5_ids = {
        {"decoder_start_token_id", 0}, {"eos_token_id", 1}, {"pad_token_id", 0}, {"transformers_version", "4.27.0.dev0"}};
    const nlohmann::json t5_tokenizer_config = {{"tokenizer_class", "T5Tokenizer"},
                                                {"model_max_length", 16384},
                                                {"extra_ids", 100},
                                                {"eos_token", "</s>"},
                                                {"pad_token", "<pad>"},
                                                {"unk_token", "<unk>"}};
    const nlohmann::json t5_special = {{"eos_token", "</s>"}, {"pad_token", "<pad>"}, {"unk_token", "<unk>"}};
    const nlohmann::json pegasus_generation = {
        {"max_length", 16384},         {"num_beams", 8},    {"length_penalty", 0.8}, {"forced_eos_token_id", 1},
        {"decoder_start_token_id", 0}, {"eos_token_id", 1}, {"pad_token_id", 0}};
    const nlohmann::json cnn_generation = {{"num_beams", 4},
                                           {"max_length", 142},
                                           {"min_length", 56},
                                           {"length_penalty", 2.0},
                                           {"no_repeat_ngram_size", 3},
                                           {"early_stopping", true},
                                           {"forced_bos_token_id", 0},
                                           {"forced_eos_token_id", 2},
                                           {"bos_token_id", 0},
                                           {"decoder_start_token_id", 2},
                                           {"eos_token_id", 2},
                                           {"pad_token_id", 1}};
    const std::string cnn_same = json_file("layout-cnn-generation", cnn_generation);
    const std::string cache = (root / "hub").string();
    const std::string pegasus_base_dir = (root / "google--pegasus-x-base").string();

    const std::vector<repository_layout> layouts = {
        {"google/long-t5-tglobal-base",
         "longt5",
         {"pytorch_model.bin"},
         {"spiece.model", "tokenizer.json:t5_v4"},
         {},
         {{"generation_config.json", t5_ids}},
         "",
         "",
         "",
         "",
         "",
         {"generation num_beams 1 (default)\n", "generation decoder_start_token_id 0 (generation_config.json)\n"},
         "tokenizer.json"},
        {"pszemraj/long-t5-tglobal-base-16384-book-summary",
         "longt5",
         {"model.safetensors", "pytorch_model.bin"},
         {"spiece.model", "tokenizer.json:t5_v4", "tokenizer_config.json:t5", "special_tokens_map.json:t5"},
         {{"num_beams", 2},
          {"max_length", 512},
          {"min_length", 8},
          {"no_repeat_ngram_size", 3},
          {"encoder_no_repeat_ngram_size", 4},
          {"repetition_penalty", 3.5},
          {"length_penalty", 0.8},
          {"early_stopping", true}},
         {},
         "",
         "",
         "",
         "--num-beams 2 --min-length 8 --no-repeat-ngram-size 3 --encoder-no-repeat-ngram-size 4 --repetition-penalty 3.5 --length-penalty 0.8 --early-stopping true",
         "",
         {"generation num_beams 2 (config.json)\n", "generation repetition_penalty 3.5 (config.json)\n",
          "generation encoder_no_repeat_ngram_size 4 (config.json)\n", "generation max_length 512 (config.json)\n"},
         "tokenizer.json"},
        {"allenai/led-base-16384",
         "led",
         {"pytorch_model.bin"},
         {"vocab.json", "merges.txt", "special_tokens_map.json:bart", "tokenizer_config.json:led"},
         {},
         {{"generation_config.json", {{"bos_token_id", 0}, {"decoder_start_token_id", 2}, {"eos_token_id", 2}, {"pad_token_id", 1}}}},
         "",
         "",
         "",
         "",
         "",
         {"generation decoder_start_token_id 2 (generation_config.json)\n", "generation pad_token_id 1 (generation_config.json)\n"},
         "vocab.json + merges.txt"},
        {"pszemraj/led-large-book-summary",
         "led",
         {"model.safetensors", "pytorch_model.bin"},
         {"vocab.json", "merges.txt", "tokenizer.json:bart"},
         {{"num_beams", 4},
          {"max_length", 1024},
          {"no_repeat_ngram_size", 3},
          {"length_penalty", 0.8},
          {"early_stopping", true},
          {"prefix", " "}},
         {},
         "",
         "",
         "",
         "--num-beams 4 --no-repeat-ngram-size 3 --length-penalty 0.8 --early-stopping true --forced-eos-token-id 2",
         " ",
         {"generation num_beams 4 (config.json)\n", "generation forced_eos_token_id 2 (config.json)\n",
          "prefix       \" \" (summarize puts it before the text)\n"},
         "tokenizer.json",
         " --min-new-tokens 10"},
        {"google/pegasus-x-base",
         "pegasus_x",
         {"pytorch_model.bin"},
         {"spiece.model", "tokenizer.json:pegasus", "tokenizer_config.json:pegasus", "special_tokens_map.json:t5"},
         {},
         {{"generation_config.json", pegasus_generation}},
         "",
         "",
         "",
         "--num-beams 8 --length-penalty 0.8",
         "",
         {"generation num_beams 8 (generation_config.json)\n", "generation max_length 16384 (generation_config.json)\n",
          "generation forced_eos_token_id 1 (generation_config.json)\n"},
         "tokenizer.json"},
        {"google/pegasus-x-base-arxiv",
         "pegasus_x",
         {"pytorch_model.bin"},
         {},
         {},
         {{"generation_config.json", pegasus_generation}},
         "",
         pegasus_base_dir,
         "google/pegasus-x-base",
         "--num-beams 8 --length-penalty 0.8",
         "",
         {"generation num_beams 8 (generation_config.json)\n"},
         ""},
        {"facebook/bart-large-cnn",
         "bart",
         {"model.safetensors"},
         {"vocab.json", "merges.txt", "tokenizer.json:bart"},
         {{"task_specific_params",
           {{"summarization",
             {{"early_stopping", true},
              {"length_penalty", 2.0},
              {"max_length", 142},
              {"min_length", 56},
              {"no_repeat_ngram_size", 3},
              {"num_beams", 4}}},
            {"summarization_cnn", {{"max_length", 142}}}}}},
         {{"generation_config.json", cnn_generation}, {"generation_config_for_summarization.json", cnn_generation}},
         "--task summarization",
         "",
         "",
         "--generation-config " + cnn_same,
         "",
         {"generation num_beams 4 (--task)\n", "generation min_length 56 (--task)\n",
          "generation forced_bos_token_id 0 (generation_config.json)\n"},
         "tokenizer.json"},
        {"facebook/bart-large",
         "bart",
         {"pytorch_model.bin:f16"},
         {"vocab.json", "merges.txt"},
         {},
         {},
         "",
         "",
         "",
         "",
         "",
         {"(F16: "},
         "vocab.json + merges.txt"},
        {"facebook/bart-base",
         "bart",
         {"model.safetensors"},
         {"vocab.json", "merges.txt"},
         {},
         {{"generation_config.json", nullptr}},
         "",
         "",
         "",
         "",
         "",
         {},
         "vocab.json + merges.txt"},
        {"tau/bart-base-sled",
         "bart",
         {},
         {"tokenizer_config.json:sled"},
         {{"replace",
           {{"model_type", "tau/sled"},
            {"underlying_config", "facebook/bart-base"},
            {"context_size", 32},
            {"window_fraction", 0.5},
            {"prepend_prefix", true},
            {"encode_prefix", true},
            {"sliding_method", "dynamic"}}}},
         {},
         "",
         "",
         "",
         "--sled-context 32 --sled-window-fraction 0.5",
         "",
         {"SLED         context 32"},
         "",
         " --min-new-tokens 10"},
        {"google/flan-t5-base",
         "t5",
         {"model.safetensors", "pytorch_model.bin"},
         {"spiece.model", "tokenizer.json:t5_v4", "tokenizer_config.json:t5", "special_tokens_map.json:t5"},
         {},
         {{"generation_config.json", t5_ids}},
         "",
         "",
         "",
         "",
         "",
         {"generation eos_token_id 1 (generation_config.json)\n"},
         "tokenizer.json"},
        {"someone/t5-finetuned-with-transformers-5",
         "t5",
         {"model.safetensors"},
         {"tokenizer.json:t5_v5", "tokenizer_config.json:t5"},
         {},
         {{"generation_config.json", t5_ids}},
         "",
         "",
         "",
         "",
         "",
         {},
         "tokenizer.json"},
    };

    auto add_to_cache = [&](const std::string& repo, const fs::path& dir) {
        std::string folder = "models--" + repo;
        folder.replace(folder.find('/'), 1, "--");
        const std::string commit(40, static_cast<char>('a' + static_cast<int>(repo.size() % 6)));
        const fs::path r = fs::path(cache) / folder, snap = r / "snapshots" / commit;
        fs::create_directories(snap);
        fs::create_directories(r / "blobs");
        fs::create_directories(r / "refs");
        std::ofstream(r / "refs" / "main") << commit;
        for (const auto& f : fs::directory_iterator(dir)) {
            const std::string blob = "blob-" + f.path().filename().string();
            fs::copy_file(f.path(), r / "blobs" / blob);
            fs::create_symlink(fs::path("../../blobs") / blob, snap / f.path().filename());
        }
        return snap.string();
    };
    std::map<std::string, std::string> by_path, snapshot;
    for (const auto& l : layouts) {
        std::string folder = l.repo;
        folder.replace(folder.find('/'), 1, "--");
        const fs::path dir = root / folder;
        fs::create_directories(dir);
        const std::string demo = demos.at(l.demo);
        for (const auto& w : l.weights) {
            if (w == "model.safetensors") fs::copy_file(demo + "/model.safetensors", dir / w);
            else write_torch_bin(demo + "/model.safetensors", dir / "pytorch_model.bin", w == "pytorch_model.bin:f16");
        }
        auto cfg = nlohmann::json::parse(slurp(demo + "/config.json"));
        if (l.config.contains("replace")) cfg = l.config["replace"];
        else
            for (const auto& [k, v] : l.config.items()) cfg[k] = v;
        std::ofstream(dir / "config.json") << cfg.dump(2);
        fs::copy_file(demo + "/README.md", dir / "README.md");  // it says UNTRAINED
        for (const auto& t : l.tokenizer) {
            const auto colon = t.find(':');
            const std::string name = t.substr(0, colon), kind = colon == std::string::npos ? "" : t.substr(colon + 1);
            if (kind.empty()) fs::copy_file(demo + "/" + name, dir / name);
            else if (name == "tokenizer.json")
                fs::copy_file(kind == "t5_v5" ? t5_v5.string() : tj + "/" + kind + "/tokenizer.json", dir / name);
            else {
                nlohmann::json j = kind == "t5" && name == "tokenizer_config.json" ? t5_tokenizer_config
                    : kind == "t5"                                                 ? t5_special
                    : kind == "led"                                                ? nlohmann::json{{"model_max_length", 16384}}
                    : kind == "pegasus"                                            ? nlohmann::json{{"tokenizer_class", "PegasusTokenizer"},
                                                         {"model_max_length", 16384},
                                                         {"offset", 103},
                                                         {"mask_token", "<mask_2>"},
                                                         {"mask_token_sent", "<mask_1>"},
                                                         {"eos_token", "</s>"},
                                                         {"pad_token", "<pad>"},
                                                         {"unk_token", "<unk>"}}
                    : kind == "sled"
                    ? nlohmann::json{{"tokenizer_class", "SledTokenizer"}, {"base_tokenizer", "facebook/bart-base"}}
                    : nlohmann::json{
                          {"bos_token", "<s>"},
                          {"eos_token", "</s>"},
                          {"unk_token", "<unk>"},
                          {"sep_token", "</s>"},
                          {"pad_token", "<pad>"},
                          {"cls_token", "<s>"},
                          {"mask_token",
                           {{"content", "<mask>"}, {"lstrip", true}, {"rstrip", false}, {"normalized", false}, {"single_word", false}}}};
                std::ofstream(dir / name) << j.dump(2);
            }
        }
        for (const auto& [name, j] : l.files) {
            if (j.is_null()) fs::copy_file(demo + "/" + name, dir / name);  // the demo checkpoint's own
            else std::ofstream(dir / name) << j.dump(2);
        }
        by_path[l.repo] = dir.string();
        snapshot[l.repo] = add_to_cache(l.repo, dir);
    }
    REQUIRE(by_path.at("google/pegasus-x-base") == pegasus_base_dir);
    setenv("HF_HUB_CACHE", cache.c_str(), 1);

    const fs::path text = root / "chapter.txt", text_prefixed = root / "chapter-prefixed.txt", sentence = root / "sentence.txt";
    const std::string chapter = slurp(fs::path(data).parent_path().parent_path() / "examples/data/pride_and_prejudice.txt").substr(0, 2500);
    std::ofstream(text) << chapter;
    std::ofstream(sentence)
        << "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.";
    for (const auto& l : layouts) {
        CAPTURE(l.repo);
        const std::string run = " --max-new-tokens 10 --threads 1" + l.run_options;
        const std::string& demo = demos.at(l.demo);
        const std::string path_model = "--model " + by_path.at(l.repo) + " " + l.options,
                          name_model = "--model " + l.repo + " " + l.options;
        auto with_tokenizer = [&](const std::string& model) {
            if (l.tokenizer_by_path.empty()) return model;
            return model + " --tokenizer " + (model == path_model ? l.tokenizer_by_path : l.tokenizer_by_name);
        };
        // inspect: valid, the tokenizer it found, and each setting from where the repository keeps it.
        for (const auto& [model, dir] : {std::pair{path_model, by_path.at(l.repo)}, std::pair{name_model, snapshot.at(l.repo)}}) {
            const auto r = run_tool("inspect " + with_tokenizer(model));
            CHECK(r.rc == 0);
            CHECK(r.out.find("validation   OK") != std::string::npos);
            for (const auto& line : l.inspect) CHECK_MESSAGE(r.out.find(line) != std::string::npos, line);
            if (!l.tokenizer_file.empty())
                CHECK(r.out.find("tokenizer    " + dir + "/" + l.tokenizer_file + " (vocabulary ") != std::string::npos);
        }
        // tokenize: the same ids as the demo checkpoint's own tokenizer files.
        const auto want_ids = run_tool("tokenize --model " + demo + " --input " + sentence.string());
        REQUIRE(want_ids.rc == 0);
        for (const auto& model : {by_path.at(l.repo), l.repo}) {
            const std::string tokenizer = l.tokenizer_by_path.empty() ? model : model == l.repo ? l.tokenizer_by_name : l.tokenizer_by_path;
            const auto r = run_tool("tokenize --model " + tokenizer + " --input " + sentence.string());
            CHECK(r.rc == 0);
            CHECK(r.out == want_ids.out);
        }
        // generate and summarize: what the demo checkpoint gives with the repository's settings as flags.
        const std::string ids = json_file("layout-ids", nlohmann::json::parse(want_ids.out));
        const auto want_gen = run_tool("generate --model " + demo + " --ids " + ids + run + " " + l.same_as);
        REQUIRE(want_gen.rc == 0);
        std::ofstream(text_prefixed) << l.prefix + chapter;
        const auto want_sum = run_tool("summarize --model " + demo + " --input " + text_prefixed.string() + run + " " + l.same_as);
        REQUIRE(want_sum.rc == 0);
        // --dry-run's input, decoding and memory lines (not the first, which names the directory,
        // nor the settings' sources).
        auto plan = [](const std::string& out) {
            std::string kept;
            for (const auto& line : lines_of(out))
                if (line.rfind("input", 0) == 0 || line.rfind("decoding", 0) == 0 || line.rfind("memory", 0) == 0 ||
                    line.rfind("  ", 0) == 0)
                    kept += line + "\n";
            return kept;
        };
        const auto want_plan =
            run_tool("summarize --model " + demo + " --input " + text_prefixed.string() + run + " " + l.same_as + " --dry-run");
        REQUIRE(want_plan.rc == 0);
        if (!l.same_as.empty() || !l.prefix.empty()) {  // the settings change the run: a test that can fail
            const auto plain_gen = run_tool("generate --model " + demo + " --ids " + ids + run);
            const auto plain_sum = run_tool("summarize --model " + demo + " --input " + text.string() + run);
            const auto plain_plan = run_tool("summarize --model " + demo + " --input " + text.string() + run + " --dry-run");
            CHECK((plain_gen.out != want_gen.out || plain_sum.out != want_sum.out || plan(plain_plan.out) != plan(want_plan.out)));
        }
        for (const auto& model : {path_model, name_model}) {
            auto r = run_tool("generate " + model + " --ids " + ids + run);
            CHECK(r.rc == 0);
            if (l.weights != std::vector<std::string>{"pytorch_model.bin:f16"}) CHECK(r.out == want_gen.out);
            r = run_tool("summarize " + with_tokenizer(model) + " --input " + text.string() + run);
            CHECK(r.rc == 0);
            if (l.weights != std::vector<std::string>{"pytorch_model.bin:f16"}) CHECK(r.out == want_sum.out);
            r = run_tool("summarize " + with_tokenizer(model) + " --input " + text.string() + run + " --dry-run");
            CHECK(r.rc == 0);
            CHECK(plan(r.out) == plan(want_plan.out));
            CHECK(!plan(r.out).empty());
        }
    }
    const std::string run = " --max-new-tokens 10 --threads 1";
    // The float16 weights are the float32 ones rounded: the same run by path and by name.
    CHECK(run_tool("summarize --model facebook/bart-large --input " + text.string() + run).out ==
          run_tool("summarize --model " + by_path.at("facebook/bart-large") + " --input " + text.string() + run).out);
    // A repository without a tokenizer, asked for text without --tokenizer: what to give.
    const auto r = run_tool("summarize --model google/pegasus-x-base-arxiv --input " + text.string() + run);
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.missing_option] summarize: " + snapshot.at("google/pegasus-x-base-arxiv") +
              " holds no tokenizer (tokenizer.json, vocab.json + merges.txt, or spiece.model); pass '--tokenizer SPM|DIR|ORG/NAME'\n");
    CHECK(run_tool("inspect --model google/pegasus-x-base-arxiv")
              .out.find("tokenizer    none in " + snapshot.at("google/pegasus-x-base-arxiv") +
                        ": text commands need --tokenizer SPM|DIR|ORG/NAME\n") != std::string::npos);
    unsetenv("HF_HUB_CACHE");
}
