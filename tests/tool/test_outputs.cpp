// Outputs of any command (io/atomic_file.hpp): written whole or not at all, never over an input,
// a directory or a device; signals leave nothing behind.
#include "tool/cli.hpp"

TEST_CASE("cli: outputs are written whole or not at all, never over an input, a directory or a device") {
    const fs::path tmp = fs::path(LOCOST_TEST_TMP) / "hostile-out";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    const fs::path demo = tmp / "demo-t5";
    REQUIRE(run_tool("demo-checkpoint --family t5 --config tiny --seed 1 --out " + demo.string()).rc == 0);
    const std::string m = demo.string();
    const std::string ids = json_file("hostile-ids", nlohmann::json::parse("[[5, 6, 7, 1]]"));
    const std::string dec = json_file("hostile-dec", nlohmann::json::parse("[[0, 5, 6]]"));

    auto r = run_tool("encode --model " + m + " --ids " + ids + " --out " + tmp.string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.io.bad_output] " + tmp.string() + ": is a directory, expected a regular file or a new name (encode --out)\n");
    r = run_tool("score --model " + m + " --ids " + ids + " --decoder-ids " + dec + " --out /dev/null");
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.io.bad_output] /dev/null: is a character device, expected a regular file or a new name (score --out)\n");
    const std::string weights = (demo / "model.safetensors").string();
    const auto before = slurp(weights);
    r = run_tool("encode --model " + m + " --ids " + ids + " --out " + weights);
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.io.output_is_input] " + weights + ": is an input of this command; refusing to write over it (encode --out)\n");
    CHECK(slurp(weights) == before);
    // Another name for an input (a hard link) is the same file.
    const fs::path alias = tmp / "alias.json";
    fs::create_hard_link(ids, alias);
    r = run_tool("generate --model " + m + " --ids " + ids + " --max-new-tokens 2 --out " + alias.string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.io.output_is_input] " + alias.string() + ": is the same file as the input " + ids +
              " of this command; refusing to write over it (generate --out)\n");
    r = run_tool("encode --model " + m + " --ids " + ids + " --out " + (tmp / "no/such/o.safetensors").string());
    CHECK(r.rc == 1);
    CHECK(r.err ==
          "locost: [locost.io.bad_output] " + (tmp / "no/such/o.safetensors").string() + ": its directory " + (tmp / "no/such").string() +
              " does not exist (encode --out)\n");

    // A symbolic link is followed: its target gets the output, the link stays a link.
    const fs::path target = tmp / "target.json", link = tmp / "link.json";
    std::ofstream(target) << "old";
    fs::create_symlink(target, link);
    r = run_tool("generate --model " + m + " --ids " + ids + " --max-new-tokens 2 --min-new-tokens 2 --out " + link.string());
    REQUIRE(r.rc == 0);
    CHECK(fs::is_symlink(link));
    CHECK(nlohmann::json::parse(slurp(target)).size() == 1);
    CHECK(leftovers(tmp).empty());

    // A write that fails (here a file-size limit of 4 KiB: the logits take 3 x 16000 x 4 bytes)
    // leaves the previous file as it was and no temporary behind.
    const fs::path logits = tmp / "logits.safetensors";
    std::ofstream(logits) << "previous";
    r = run_shell("ulimit -f 4; \"$LOCOST\" score --model " + m + " --ids " + ids + " --decoder-ids " + dec + " --out " + logits.string());
    CHECK(r.rc == 1);
    CHECK(r.err == "locost: [locost.io.write_failed] " + logits.string() + ": cannot write (File too large); nothing was written to it\n");
    CHECK(slurp(logits) == "previous");
    CHECK(leftovers(tmp).empty());
    // Standard output that cannot be written is an error, not a silent loss.
    r = run_shell("\"$LOCOST\" generate --model " + m + " --ids " + ids + " --max-new-tokens 2 >/dev/full");
    CHECK(r.rc == 1);
    CHECK(r.err.find("locost: [locost.io.stdout_failed] cannot write standard output (") != std::string::npos);

    // A temporary in flight is what a SIGINT/SIGTERM handler removes.
    {
        locost::io::atomic_file f((tmp / "interrupted.json").string());
        f.write(std::string("[1, 2"));
        REQUIRE(fs::exists(f.temporary_path()));
        locost::io::remove_pending_temporaries();
        CHECK_FALSE(fs::exists(f.temporary_path()));
    }
    CHECK_FALSE(fs::exists(tmp / "interrupted.json"));
    // A SIGTERM (here during a long encode) ends the tool as the signal would, status 128 + 15,
    // with nothing left behind.
    std::vector<std::int64_t> row(60000, 5);
    const std::string long_ids = json_file("hostile-long", nlohmann::json::array({row}));
    r = run_shell("\"$LOCOST\" encode --model " + m + " --ids " + long_ids + " --out " + (tmp / "long.safetensors").string() +
                  " & pid=$!; sleep 0.5; kill -TERM $pid; wait $pid; echo status $?");
    CHECK(r.out == "status 143\n");
    CHECK(leftovers(tmp).empty());
    CHECK_FALSE(fs::exists(tmp / "long.safetensors"));
}
