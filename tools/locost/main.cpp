// locost: the command-line tool. One subcommand per verb; each documents itself with --help.
// Errors are printed to stderr as "locost: [locost.<id>] <message>" with exit status 1
// (2 for command-line misuse, ids cli.*).
#include <locost/locost.hpp>

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "args.hpp"
#include "commands.hpp"

namespace {

constexpr const char* usage =
    "locost " LOCOST_VERSION_STRING " - long-document seq2seq (LOCOST, T5, BART, LongT5, LED, Pegasus-X, SLED) on the CPU\n"
    "\n"
    "usage: locost <command> [options]      locost <command> --help\n"
    "\n"
    "commands:\n"
    "  inspect           show a checkpoint's config and tensors and validate them\n"
    "  demo-checkpoint   write a checkpoint of seeded random (UNTRAINED) weights of any family\n"
    "  encode            run the encoder over token ids or a text, write last_hidden_state\n"
    "  score             teacher-forced logits of decoder inputs\n"
    "  generate          generate token ids (greedy, beam search, sampling)\n"
    "  summarize         summarize a text file (a whole book in one pass)\n"
    "  chunks            print SLED's window plan for an input length\n"
    "  tokenize          print the token ids of a text (the checkpoint's tokenizer and conventions)\n"
    "  detokenize        print the text of token ids\n"
    "  serve             answer HTTP requests in the OpenAI API's conventions (completions, chat, streaming)\n"
    "  eval              summarize a data set and score the summaries with ROUGE against its references\n"
    "\n"
    "options:\n"
    "  --help, -h        this text\n"
    "  --version         print the version\n";

}  // namespace

// OpenMP's threads busy-wait ~300K iterations at every barrier by default. Decoding runs many
// small parallel steps, and when another process takes a core a spinning thread waits for one
// that is not running: measured 120 ms/token instead of 35 with one competing busy process. A
// short spin (GOMP_SPINCOUNT=10000) keeps the quiet-machine speed (36.5 ms/token) and halves the
// loss (79 ms/token). libgomp reads it at start-up, so the tool re-executes itself once with it,
// unless the user chose a wait policy.
static void set_openmp_wait(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
    ::setenv("GOMP_SPINCOUNT", "10000", 1);
    ::execv("/proc/self/exe", argv);  // returns only on failure: then carry on as we are
}

// Output files are written to temporaries and renamed (io::atomic_file). Interrupted, the tool
// removes the temporaries in flight and dies of the signal as it would have. A file-size limit
// (ulimit -f) makes writes fail with EFBIG, reported as io.write_failed, instead of killing the
// process with SIGXFSZ mid-file.
extern "C" void locost_on_signal(int sig) {
    locost::io::remove_pending_temporaries();
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

static void install_signal_handlers() {
    ::signal(SIGINT, locost_on_signal);
    ::signal(SIGTERM, locost_on_signal);
    ::signal(SIGHUP, locost_on_signal);
    ::signal(SIGXFSZ, SIG_IGN);
}

// What a command printed must have reached its destination: a full disk or a closed terminal is an
// error (exit 1), not a silent loss. A closed pipe (EPIPE, `locost ... | head`) is the reader's
// choice and ends the tool quietly through SIGPIPE before this is reached.
static int check_stdout(int rc) {
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    if (flushed && !std::ferror(stdout)) return rc;
    const int e = errno;
    if (e == EPIPE) return rc;
    std::fprintf(stderr, "locost: [locost.io.stdout_failed] cannot write standard output (%s); the command's output is incomplete\n",
                 e ? std::strerror(e) : "write error");
    return 1;
}

int main(int argc, char** argv) {
    set_openmp_wait(argv);
    install_signal_handlers();
    locost::cli::flush_denormals_unless_kept();
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
        std::fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        std::puts("locost " LOCOST_VERSION_STRING);
        return 0;
    }
    const std::string cmd = argv[1];
    try {
        for (const auto& c : locost::cli::commands()) {
            if (cmd != c.name) continue;
            locost::cli::args a(cmd, argc, argv, 2, c.valued, c.flags);
            if (a.help()) {
                std::fputs(c.help.c_str(), stdout);
                return 0;
            }
            (void)locost::float32_gemm();  // a LOCOST_GEMM this build cannot honour is an error, not a fallback
            (void)locost::kernels_isa();   // so is a LOCOST_ISA this CPU or build cannot run
            // Model commands settle the device before reading any input or weight.
            if (cmd != "inspect" && c.valued.count("device")) locost::cli::require_model_device(a, cmd);
            return check_stdout(c.run(a));
        }
        throw locost::error("cli.unknown_command", "unknown command '" + cmd + "' (see 'locost --help')");
    } catch (const locost::error& e) {
        // (escaped and bounded: a message may quote a file's name or text, which must not write
        // control sequences or lines of their own into a terminal or a log)
        std::fprintf(stderr, "locost: %s\n", locost::io::detail::terminal_safe(e.what()).c_str());
        return e.id().rfind("cli.", 0) == 0 ? 2 : 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "locost: [locost.system.out_of_memory] %s: out of memory while %s\n", cmd.c_str(),
                     locost::cli::current_phase().c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "locost: [locost.system.unexpected] %s: %s\n", cmd.c_str(),
                     locost::io::detail::terminal_safe(e.what()).c_str());
        return 1;
    }
}
