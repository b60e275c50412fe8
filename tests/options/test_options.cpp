// The option table (include/locost/options/): one record per option, read alike from the tool's
// text and from typed values (Python, a JSON request), with messages that name the option as the
// front end spells it.
#include <doctest/doctest.h>

#include <locost/options/given.hpp>

#include <set>
#include <string>
#include <vector>

using namespace locost;
using options::json;
using options::spelling;

namespace {

std::string message_of(const std::function<void()>& f, std::string* id = nullptr) {
    try {
        f();
    } catch (const error& e) {
        if (id) *id = e.id();
        return e.message();
    }
    return "(no error)";
}

json from_text(const char* name, const std::string& text) {
    return options::read_value(*options::find(name), &text, nullptr, spelling::flag, "t");
}
json from_typed(const char* name, const json& v, spelling s = spelling::keyword) {
    return options::read_value(*options::find(name), nullptr, &v, s, "t");
}

}  // namespace

TEST_CASE("options: the table's records are well formed: unique names, help for each, choices listed") {
    std::set<std::string> names;
    for (const auto& r : options::table()) {
        CAPTURE(r.name);
        CHECK(names.insert(std::string(r.name)).second);
        CHECK(!r.help.empty());
        CHECK(r.name.find('-') == std::string_view::npos);  // snake_case; the tool's dashes are derived
        if (r.type == options::value_type::choice) {
            CHECK(!r.choices.empty());
            CHECK(!r.choices.front().alias);
        }
        if (r.type == options::value_type::integer || r.type == options::value_type::real) CHECK(r.lo <= r.hi);
        if (r.needs_sled) CHECK(static_cast<bool>(r.fill));
    }
    // The tool's names follow from the records'.
    CHECK(options::find("num_beams")->flag_name() == "--num-beams");
    CHECK(options::tool_names({options::group::generation}, true) == std::set<std::string>{"do-sample"});
    CHECK(options::tool_names({options::group::model}, true) == std::set<std::string>{"no-encode-prefix"});
}

TEST_CASE("options: a value from the tool's text equals the same value typed") {
    CHECK(from_text("num_beams", "4") == from_typed("num_beams", 4));
    CHECK(from_text("length_penalty", "0.5") == from_typed("length_penalty", 0.5));
    CHECK(from_typed("length_penalty", 2) == json(2.0));  // an int where a real is expected
    CHECK(from_text("seed", "18446744073709551615") == from_typed("seed", json(~std::uint64_t{0})));
    CHECK(from_text("forced_eos_token_id", "7") == from_typed("forced_eos_token_id", 7));
    CHECK(from_text("eos_token_id", "[1,2]") == from_typed("eos_token_id", json::array({1, 2})));
    CHECK(from_text("suppress_tokens", "[]") == from_typed("suppress_tokens", json::array()));
    CHECK(from_text("bad_words_ids", "[[5],[7,8]]") == from_typed("bad_words_ids", json::parse("[[5],[7,8]]")));
    CHECK(from_text("global_tokens", "0,5,50") == from_typed("global_tokens", json::array({0, 5, 50})));
    CHECK(from_text("global_tokens", "") == json::array());
    CHECK(from_text("memory_budget", "12G") == json(12e9));
    CHECK(from_text("memory_budget", "1.5GiB") == from_typed("memory_budget", 1.5 * 1024 * 1024 * 1024));
    CHECK(from_typed("memory_budget", "800M") == json(800e6));
    CHECK(from_text("memory_budget", "unlimited") == json("unlimited"));
    CHECK(from_typed("do_sample", true) == json(true));
    CHECK(from_typed("early_stopping", true) == json("true"));  // Python's True for transformers' early_stopping=True
    CHECK(from_text("early_stopping", "never") == json("never"));
}

TEST_CASE("options: precisions have one set of names: float32, fp32 and f32 alike wherever a precision is chosen") {
    for (const char* name : {"compute", "weights", "cross_cache"}) {
        CAPTURE(name);
        CHECK(from_text(name, "f32") == from_text(name, "float32"));
        CHECK(from_text(name, "fp32") == from_text(name, "float32"));
        CHECK(from_text(name, "bf16") == from_text(name, "bfloat16"));
        CHECK(from_text(name, "int8") == json("int8"));
    }
    // Each is kept as the name its listing uses, and fills the enum.
    CHECK(from_text("compute", "fp32") == json("float32"));
    CHECK(from_text("weights", "fp32") == json("float32"));
    models::model_options o;
    options::targets t{&o, nullptr};
    options::find("compute")->fill(t, from_text("compute", "bfloat16"));
    options::find("weights")->fill(t, from_text("weights", "bf16"));
    options::find("cross_cache")->fill(t, from_text("cross_cache", "f32"));
    CHECK(o.encoder.compute == models::compute_precision::bf16);
    CHECK(o.weights == models::weight_precision::bf16);
    CHECK(o.cross_cache == models::cross_cache_precision::f32);
}

TEST_CASE("options: a bad value is refused naming the option as its front end spells it") {
    std::string id;
    CHECK(message_of([] { from_text("num_beams", "0"); }, &id) == "t: option '--num-beams' expects an integer in [1, 2147483647], got '0'");
    CHECK(id == "cli.bad_value");
    CHECK(message_of([] { from_typed("num_beams", 0); }, &id) == "t: argument 'num_beams' expects an integer in [1, 2147483647], got 0");
    CHECK(id == "python.bad_argument");
    CHECK(message_of([] { from_typed("num_beams", 0, spelling::field); }, &id) ==
          "t: field 'num_beams' expects an integer in [1, 2147483647], got 0");
    CHECK(id == "server.bad_request");
    // Types are not guessed: "4", 4.0 and True are no number of beams.
    CHECK(message_of([] { from_typed("num_beams", "4"); }) == "t: argument 'num_beams' expects an integer in [1, 2147483647], got '4'");
    CHECK(message_of([] { from_typed("num_beams", 4.0); }) == "t: argument 'num_beams' expects an integer in [1, 2147483647], got 4.0");
    CHECK(message_of([] { from_typed("num_beams", true); }) == "t: argument 'num_beams' expects an integer in [1, 2147483647], got True");
    CHECK(message_of([] { from_typed("top_p", 1.5); }) == "t: argument 'top_p' expects a number in [0, 1], got 1.5");
    CHECK(message_of([] { from_text("top_p", "nan"); }) == "t: option '--top-p' expects a number in [0, 1], got 'nan'");
    CHECK(message_of([] { from_typed("weights", "int4"); }) == "t: argument 'weights' expects float32, bfloat16 or int8, got 'int4'");
    CHECK(message_of([] { from_text("early_stopping", "yes"); }) == "t: option '--early-stopping' expects true, false or never, got 'yes'");
    CHECK(message_of([] { from_text("bad_words_ids", "[5]"); }) ==
          "t: option '--bad-words-ids' expects a JSON list of lists of ids like [[5],[7,8]], got '[5]'");
    CHECK(message_of([] { from_typed("bad_words_ids", json::array({5})); }) ==
          "t: argument 'bad_words_ids' expects a list of lists of ids like [[5],[7,8]], got [5]");
    CHECK(message_of([] { from_text("forced_eos_token_id", "[-0.5]"); }) ==
          "t: option '--forced-eos-token-id' expects a token id or a JSON list of ids, got '[-0.5]'");
    CHECK(message_of([] { from_text("global_tokens", "0,-1"); }) ==
          "t: option '--global-tokens' expects comma-separated positions (integers >= 0), got '0,-1'");
    CHECK(message_of([] { from_text("memory_budget", "12 parsecs"); }) ==
          "t: option '--memory-budget' expects a size such as 12G, 800M, 1.5GiB or 'unlimited', got '12 parsecs'");
    CHECK(message_of([] { from_typed("do_sample", 1); }) == "t: argument 'do_sample' expects True or False, got 1");
    // What a message quotes is printable and bounded.
    CHECK(message_of([] { from_text("num_beams", "4\x1b[2J"); }) ==
          "t: option '--num-beams' expects an integer in [1, 2147483647], got '4\\x1b[2J'");
}

TEST_CASE("options: given from typed values: unknown names list what the call takes, None is not given, False is") {
    const std::vector<const options::record*> allowed = options::records_of({options::group::generation});
    const options::given g("summarize", spelling::keyword, {{"num_beams", 4}, {"top_k", nullptr}, {"do_sample", false}}, allowed);
    CHECK(g.has("num_beams"));
    CHECK(g.has("num-beams"));  // either spelling names the option
    CHECK(g.value("num_beams") == json(4));
    CHECK(!g.has("top_k"));
    CHECK(g.has("do_sample"));
    CHECK(!g.flag("do_sample"));
    CHECK(g.named("num-beams") == "argument 'num_beams'");
    std::string id;
    const std::string m = message_of([&] { options::given("summarize", spelling::keyword, {{"beams", 4}}, allowed); }, &id);
    CHECK(id == "python.unknown_argument");
    CHECK(m.rfind("summarize: unknown argument 'beams' (it takes: generation_config, task, max_length, max_new_tokens, ", 0) == 0);
}

TEST_CASE("options: generation options fill transformers' settings; max_new_tokens wins over max_length as in transformers") {
    generation::generation_options o;
    options::targets t{nullptr, &o};
    const auto fill = [&](const char* name, const json& v) { options::find(name)->fill(t, from_typed(name, v)); };
    fill("max_length", 30);
    CHECK(o.total_length() == 30);
    fill("max_new_tokens", 8);
    CHECK(o.total_length() == 9);
    fill("early_stopping", "never");
    CHECK(o.early_stopping == io::early_stopping_mode::never);
    fill("beam_convention", "transformers-4.27");
    CHECK(o.beam_convention == generation::beam_convention::hf_4_27);
    fill("forced_eos_token_id", 2);
    CHECK(o.forced_eos_token_id == std::vector<index_t>{2});
    fill("bad_words_ids", json::parse("[[5],[7,8]]"));
    CHECK(o.bad_words_ids == std::vector<std::vector<index_t>>{{5}, {7, 8}});
    CHECK(options::find("num_beams")->show(t) == "1");
    CHECK(options::find("bad_words_ids")->show(t) == "[[5],[7,8]]");
    CHECK(options::find("forced_bos_token_id")->show(t) == "none");
}

TEST_CASE("options: --help lines come from the records") {
    const std::string h = options::help_text({options::group::generation}, 31);
    CHECK(h.find("  --num-beams K                beam search with K beams (1: greedy or sampling)\n") != std::string::npos);
    CHECK(h.find("  --do-sample                  sample instead of greedy\n") != std::string::npos);
    const std::string m = options::help_text({options::group::model});
    CHECK(m.find("SLED (any checkpoint; a SLED config.json sets the first two itself):\n  --sled-context C") != std::string::npos);
    for (const auto& line : [&] {
             std::vector<std::string> lines;
             std::size_t at = 0;
             while (at < m.size()) {
                 const auto end = m.find('\n', at);
                 lines.push_back(m.substr(at, end - at));
                 at = end + 1;
             }
             return lines;
         }())
        CHECK(line.size() <= 104);
}
