// The locost subcommands. Each entry: its name, its --help text, the options it takes
// (valued and boolean), and the function that runs it.
#pragma once
#include <locost/locost.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "args.hpp"

namespace locost::cli {

struct command {
    const char* name;
    const char* help;
    std::set<std::string> valued;
    std::set<std::string> flags;
    std::function<int(const args&)> run;
};

int run_inspect(const args& a);
int run_demo_checkpoint(const args& a);
int run_encode(const args& a);

inline const std::vector<command>& commands() {
    static const std::vector<command> all = {
        {"inspect",
         "usage: locost inspect --model DIR [--json]\n"
         "\n"
         "Shows the model type and key config values of the checkpoint in DIR (config.json plus\n"
         "model.safetensors, a sharded model.safetensors.index.json, or pytorch_model.bin), every\n"
         "tensor (name, dtype, shape, source file), the parameter count, and whether the tensors\n"
         "match what the config requires. Exits 1 when the checkpoint does not validate.\n"
         "\n"
         "  --model DIR   checkpoint directory\n"
         "  --json        print one JSON object instead of text\n",
         {"model"}, {"json"}, run_inspect},
        {"demo-checkpoint",
         "usage: locost demo-checkpoint --config base|tiny --out DIR [--seed S] [--spm FILE]\n"
         "\n"
         "Writes a LOCOST checkpoint of seeded random, UNTRAINED weights (initialised like the\n"
         "original code), its config.json, spiece.model and a README saying what it is. Useful to\n"
         "exercise and measure the software; what it generates is not meaningful.\n"
         "\n"
         "  --config base|tiny  base: d_model 768, d_state 512, d_ff 2048, 12+12 layers, 12 heads,\n"
         "                      vocab 32100, gated-gelu (the paper's pretraining config);\n"
         "                      tiny: d_model 64, d_state 16, d_ff 128, 2+2 layers, vocab 512\n"
         "  --out DIR           output directory (created; existing checkpoint files are replaced)\n"
         "  --seed S            random seed (default 0)\n"
         "  --spm FILE          SentencePiece model to copy in as spiece.model\n"
         "                      (default: the books-16k.model kept in the locost repository)\n",
         {"config", "out", "seed", "spm"}, {}, run_demo_checkpoint},
        {"encode",
         "usage: locost encode --model DIR (--ids IDS.json | --input FILE.txt [--tokenizer SPM])\n"
         "                     --out OUT.safetensors [--threads N] [--progress]\n"
         "\n"
         "Runs the LOCOST encoder and writes one float32 tensor `last_hidden_state` of shape\n"
         "(B, L, d_model) to OUT.\n"
         "\n"
         "  --model DIR        checkpoint directory (config.json + weights, optional spiece.model)\n"
         "  --ids IDS.json     a JSON array of token ids, or an array of arrays (a batch; shorter\n"
         "                     rows are padded with pad_token_id and masked)\n"
         "  --input FILE.txt   text to tokenize ('-' reads stdin); T5 conventions (</s> appended)\n"
         "  --tokenizer SPM    SentencePiece model (default: DIR/spiece.model)\n"
         "  --out FILE         output safetensors file\n"
         "  --threads N        worker threads (default: all cores)\n"
         "  --progress         show progress on stderr even when it is not a terminal\n",
         {"model", "ids", "input", "tokenizer", "out", "threads"}, {"progress"}, run_encode},
    };
    return all;
}

} // namespace locost::cli

#include "cmd_demo_checkpoint.hpp"
#include "cmd_encode.hpp"
#include "cmd_inspect.hpp"
