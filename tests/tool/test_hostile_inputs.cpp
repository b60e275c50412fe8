// Hostile inputs to any command: files that are not regular text files, contradictory options,
// non-finite weights and logits, hostile checkpoint directories, and what a file says reaching
// stderr escaped and bounded.
#include "tool/cli.hpp"

// ---- hostile inputs and outputs (issue: resource limits and output integrity) ----------------

TEST_CASE("cli: inputs that are not regular text files, and option contradictions, are refused with the path and exit 1 or 2") {
    const fs::path tmp = fs::path(LOCOST_TEST_TMP) / "hostile-in";
    fs::create_directories(tmp);
    const fs::path demo = tmp / "demo-t5";
    REQUIRE(run_tool("demo-checkpoint --family t5 --config tiny --seed 1 --out " + demo.string()).rc == 0);
    const std::string m = demo.string(), out = (tmp / "o.safetensors").string();
    const fs::path ok = tmp / "ok.txt";
    std::ofstream(ok) << "It is a truth universally acknowledged.";

    auto r = run_tool("summarize --model " + m + " --input " + tmp.string());
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.io.not_a_file] " + tmp.string() + ": is a directory, expected a regular file (--input)\n");
    r = run_tool("generate --model " + m + " --ids /dev/zero");
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.io.not_a_file] /dev/zero: is a character device, expected a regular file (--ids)\n");
    const fs::path fifo = tmp / "fifo";
    fs::remove(fifo);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    r = run_tool("encode --model " + m + " --ids " + fifo.string() + " --out " + out);
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.io.not_a_file] " + fifo.string() + ": is a FIFO, expected a regular file (--ids)\n");
    // Too large, refused from its size before it is read (a sparse file: nothing is written).
    const fs::path huge = tmp / "huge.txt";
    { std::ofstream(huge) << "x"; }
    fs::resize_file(huge, std::uintmax_t{300} << 20);
    r = run_tool("summarize --model " + m + " --input " + huge.string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.io.input_too_large] " + huge.string() + ": 300.0 MiB is more than the 256.0 MiB an input may hold (--input)\n");
    fs::remove(huge);
    r = run_shell("head -c 300000000 /dev/zero | \"$LOCOST\" summarize --model " + m + " --input -");
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.io.input_too_large] standard input is more than the 256.0 MiB an input may hold (--input)\n");

    // Documents without text.
    const fs::path blank = tmp / "blank.txt", binary = tmp / "binary.txt", latin = tmp / "latin.txt";
    std::ofstream(blank) << "  \n\t \r\n";
    { std::ofstream(binary, std::ios::binary) << std::string("abc\0def", 7); }
    std::ofstream(latin, std::ios::binary) << std::string(100, '\xff');
    r = run_tool("summarize --model " + m + " --input " + blank.string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.input.no_text] " + blank.string() +
              ": no text to read (7 bytes, all of them whitespace or control characters)\n");
    r = run_tool("encode --model " + m + " --input " + binary.string() + " --out " + out);
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.input.not_text] " + binary.string() + ": not a text file (a NUL byte at offset 3)\n");
    r = run_tool("summarize --model " + m + " --input " + latin.string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.input.not_text] " + latin.string() + ": not UTF-8 text (100 of its 100 bytes are not well-formed UTF-8)\n");
    r = run_shell("printf \"\\n\\n\" | \"$LOCOST\" summarize --model " + m + " --input -");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.input.no_text] standard input: no text to read (2 bytes, all of them whitespace or control characters)\n");

    // Contradictory flags: a command-line error, exit 2.
    r = run_tool("summarize --model " + m + " --input " + ok.string() + " --min-new-tokens 5 --max-new-tokens 2");
    CHECK(r.rc == 2);
    CHECK(
        r.err ==
        "locost: [locost.cli.bad_value] summarize: the minimum of 5 new tokens (--min-new-tokens) exceeds the maximum of 2 (--max-new-tokens)\n");
    r = run_tool("summarize --model " + m + " --input " + ok.string() + " --min-length 9 --max-length 4");
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] summarize: the minimum of 8 new tokens (--min-length) exceeds the maximum of 3 (--max-length)\n");
    r = run_tool("summarize --model " + m + " --input " + ok.string() + " --min-new-tokens 3 --max-new-tokens 3");
    CHECK(r.rc == 0);
}

TEST_CASE("cli: non-finite weights are refused at load, non-finite logits stop decoding") {
    const fs::path tmp = fs::path(LOCOST_TEST_TMP) / "hostile-nan";
    fs::remove_all(tmp);
    const fs::path demo = tmp / "demo-t5";
    REQUIRE(run_tool("demo-checkpoint --family t5 --config tiny --seed 1 --out " + demo.string()).rc == 0);
    const std::string ids = json_file("nan-ids", nlohmann::json::parse("[[5, 6, 7, 1]]"));
    const fs::path weights = demo / "model.safetensors", saved = tmp / "saved.safetensors";
    fs::copy_file(weights, saved);
    const std::string name = "encoder.block.0.layer.1.DenseReluDense.wo.weight";
    patch_tensor(weights, name, 7, 1, std::numeric_limits<float>::quiet_NaN());
    auto r = run_tool("generate --model " + demo.string() + " --ids " + ids + " --max-new-tokens 2");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.checkpoint.non_finite] " + weights.string() + ": tensor '" + name +
              "' holds a non-finite value (nan) at element 7 of 8192; the weights are corrupt or overflowed when saved\n");
    CHECK(r.out.empty());
    // Finite weights so large that the decoder's states overflow: no ids, an error naming the step.
    fs::copy_file(saved, weights, fs::copy_options::overwrite_existing);
    patch_tensor(weights, "decoder.final_layer_norm.weight", 0, 64, 3e38f);
    r = run_tool("generate --model " + demo.string() + " --ids " + ids + " --max-new-tokens 2");
    CHECK(r.rc == 1);
    CHECK(r.err.rfind("locost: [locost.generate.non_finite_logits] decoding step 1: the model's logits hold ", 0) == 0);
    CHECK(r.out.empty());
    // States that collapse (here a zero final norm; float16 weights at ±65504 do it through an
    // overflowing mean of squares) make every logit equal: an error, not id 0 again and again.
    fs::copy_file(saved, weights, fs::copy_options::overwrite_existing);
    patch_tensor(weights, "decoder.final_layer_norm.weight", 0, 64, 0.0f);
    r = run_tool("generate --model " + demo.string() + " --ids " + ids + " --max-new-tokens 2");
    CHECK(r.rc == 1);
    const std::string constant =
        "locost: [locost.generate.constant_logits] decoding step 1: the model's logits of row 0 are all 0.000000; the "
        "weights or the encoder states overflow, so no ids are returned\n";
    CHECK(r.err == constant);
    CHECK(r.out.empty());
    // Float16 weights at ±65504, float16's largest (a half-precision save after training diverged):
    // finite, but the states overflow inside the norms and every logit comes out 0.
    {
        const auto records = locost::io::read_safetensors(saved.string());
        locost::io::safetensors_writer w(locost::dtype::f16);
        std::vector<std::vector<float>> values;
        for (const auto& rec : records) {
            auto& v = values.emplace_back(static_cast<std::size_t>(rec.shape.numel()));
            for (std::size_t i = 0; i < v.size(); ++i) v[i] = i % 2 ? -65504.0f : 65504.0f;
            w.add(rec.name, locost::view<const float>{v.data(), rec.shape});
        }
        w.write(weights.string());
    }
    r = run_tool("generate --model " + demo.string() + " --ids " + ids + " --max-new-tokens 2");
    CHECK(r.rc == 1);
    CHECK(r.err == constant);
    CHECK(r.out.empty());

    // Settings from generation_config.json are held to the flags' ranges.
    fs::copy_file(saved, weights, fs::copy_options::overwrite_existing);
    auto refused = [&](const std::string& settings, const std::string& flags, const std::string& message) {
        std::ofstream(demo / "generation_config.json", std::ios::trunc)
            << R"({"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0, )" + settings + "}";
        const auto x = run_tool("generate --model " + demo.string() + " --ids " + ids + " " + flags);
        CHECK(x.rc == 1);
        CHECK(x.err == "locost: [locost.generate.invalid_option] generation option " + message + "\n");
    };
    refused(R"("do_sample": true, "temperature": 1e-300)", "--max-new-tokens 2",
            "'temperature' is 1e-300, expected a number in [1e-09, 1e+09] when sampling");
    refused(R"("do_sample": true, "temperature": 1e39)", "--max-new-tokens 2",
            "'temperature' is 1e+39, expected a number in [1e-09, 1e+09] when sampling");
    refused(R"("num_beams": 2, "length_penalty": 45)", "--max-new-tokens 19",
            "'length_penalty' is 45, expected a number in [-29.1537, 29.6164] at a maximum length of 20 (beyond it length^length_penalty "
            "leaves float32's range and beam scores lose their order)");
}

TEST_CASE("cli: hostile checkpoint directories: FIFOs are refused without waiting, a huge config.json under a memory limit is an error") {
    const fs::path tmp = fs::path(LOCOST_TEST_TMP) / "hostile-files";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    const fs::path d = tmp / "t5";
    fs::copy(data + "/hf/t5_v11", d);
    fs::remove(d / "model.safetensors");
    REQUIRE(::mkfifo((d / "model.safetensors").c_str(), 0644) == 0);
    auto r = run_tool("inspect --model " + d.string());
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.io.not_a_file] " + (d / "model.safetensors").string() + ": is a FIFO, expected a regular file\n");
    fs::remove(d / "model.safetensors");
    fs::copy_file(data + "/hf/t5_v11/model.safetensors", d / "model.safetensors");
    {
        std::ofstream f(d / "config.json", std::ios::trunc);
        f << "{\"model_type\": \"t5\", \"junk\": [";
        for (int i = 0; i < 25 * 1000 * 1000; ++i) f << "[1],";  // ~2 GB as a JSON tree: refused by size, never parsed
        f << "1]}";
    }
    const fs::path out = tmp / "out", err = tmp / "err";
    // 2 GB of address space: room for the tool and its libraries (cuBLAS included), not for the tree.
    const int status = std::system(
        ("ulimit -v 2000000; " + std::string(LOCOST_TOOL) + " inspect --model " + d.string() + " >" + out.string() + " 2>" + err.string())
            .c_str());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(slurp(err) ==
          "locost: [locost.io.file_too_large] " + (d / "config.json").string() +
              ": is 95.4 MiB, more than the 8 MiB a configuration file may hold\n");
    fs::remove_all(tmp);  // 100 MB
}

TEST_CASE(
    "cli: what a file says reaches stderr escaped and bounded; ids that are not integers; a backbone nothing takes; a prefix that is not text") {
    const fs::path tmp = fs::path(LOCOST_TEST_TMP) / "hostile-text";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    // A file name with a newline and a terminal escape, quoted by an error: one line, escaped.
    const std::string evil = (tmp / "x\n\x1b[31mlocost: [locost.fake] y").string();
    auto r = run_tool("tokenize --model " + data + "/hf/bart --input '" + evil + "'");
    CHECK(r.rc == 1);
    CHECK(r.err.find('\x1b') == std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find("x\\x0a\\x1b[31mlocost: [locost.fake] y") != std::string::npos);

    const std::string enc = (tmp / "ids.json").string();
    std::ofstream(enc) << "[5, 6, 7, 1]";
    for (const char* bad : {"[-0.5]", "[1e30]", "[2.0]", "[\"3\"]"}) {
        CAPTURE(bad);
        r = run_tool("generate --model " + tiny + " --ids " + enc + " --max-new-tokens 2 --suppress-tokens '" + bad + "'");
        CHECK(r.rc == 2);
        CHECK(r.err ==
              "locost: [locost.cli.bad_value] generate: option '--suppress-tokens' expects a JSON list of ids like [5,7], got '" +
                  std::string(bad) + "'\n");
    }
    r = run_tool("generate --model " + tiny + " --ids " + enc + " --max-new-tokens 2 --bad-words-ids '[[5],[0.5]]'");
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] generate: option '--bad-words-ids' expects a JSON list of lists of ids like [[5],[7,8]], got "
          "'[[5],[0.5]]'\n");
    r = run_tool("generate --model " + tiny + " --ids " + enc + " --max-new-tokens 2 --eos-token-id 1.5");
    CHECK(r.rc == 2);
    CHECK(r.err ==
          "locost: [locost.cli.bad_value] generate: option '--eos-token-id' expects a token id or a JSON list of ids, got '1.5'\n");

    // --backbone for a checkpoint with weights of its own would be ignored: refused.
    r = run_tool("generate --model " + tiny + " --backbone " + data + "/hf/t5_v11 --ids " + enc + " --max-new-tokens 2");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.sled.bad_backbone] --backbone " + data +
              "/hf/t5_v11: a backbone is taken by a SLED checkpoint whose "
              "directory holds no weights; " +
              tiny + " is a 'locost' checkpoint with weights of its own\n");

    // A "prefix" in config.json that is not a string, and --task over a file of many tasks.
    const fs::path ck = tmp / "t5";
    fs::create_directories(ck);
    for (const auto& e : fs::directory_iterator(data + "/hf/t5_v11")) fs::copy_file(e.path(), ck / e.path().filename());
    auto config = nlohmann::json::parse(slurp(ck / "config.json"));
    config["prefix"] = 5;
    std::ofstream(ck / "config.json", std::ios::trunc) << config.dump();
    r = run_tool("generate --model " + ck.string() + " --ids " + enc + " --max-new-tokens 2");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.config.wrong_type] " + ck.string() + "/config.json: field 'prefix' is a JSON integer, expected a string\n");
    config.erase("prefix");
    for (int i = 0; i < 1000; ++i) config["task_specific_params"]["t" + std::to_string(i)] = {{"max_length", 3}};
    config["task_specific_params"]["\x1b[2Jx"] = {{"max_length", 3}};
    std::ofstream(ck / "config.json", std::ios::trunc) << config.dump();
    r = run_tool("generate --model " + ck.string() + " --ids " + enc + " --task summarization");
    CHECK(r.rc == 2);
    CHECK(r.err.find('\x1b') == std::string::npos);
    CHECK(r.err.find(", and 989 more)") != std::string::npos);
    CHECK(r.err.size() < 400);
}
