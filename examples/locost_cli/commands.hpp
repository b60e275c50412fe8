// The locost subcommands. Each entry: its name, its --help text, the options it takes
// (valued and boolean), and the function that runs it.
#pragma once
#include <locost/locost.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "args.hpp"
#include "gen_flags.hpp"

namespace locost::cli {

struct command {
    const char* name;
    std::string help;
    std::set<std::string> valued;
    std::set<std::string> flags;
    std::function<int(const args&)> run;
};

int run_inspect(const args& a);
int run_demo_checkpoint(const args& a);
int run_encode(const args& a);
int run_score(const args& a);
int run_generate(const args& a);
int run_summarize(const args& a);

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
         "                      tiny: d_model 64, d_state 16, d_ff 128, 2+2 layers, 4 heads, the vocabulary\n"
         "                      of the SentencePiece model (16000 for the default)\n"
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
        {"score",
         std::string("usage: locost score --model DIR --ids IDS.json --decoder-ids DEC.json --out OUT.safetensors\n"
         "                    [--threads N] [--progress]\n"
         "\n"
         "Teacher forcing: writes the float32 `logits` (B, T, vocab) of the decoder inputs DEC.json given the\n"
         "encoder inputs IDS.json. IDS.json and DEC.json are each an array of ids (B = 1) or an array of arrays\n"
         "(a batch; IDS rows may differ in length and are padded and masked; DEC rows must be of equal length,\n"
         "each starting with the decoder start token, 0 for LOCOST/T5).\n"
         "\n") + model_help,
         joined({{"model", "ids", "decoder-ids", "out"}, model_valued}), {"progress"}, run_score},
        {"generate",
         std::string("usage: locost generate --model DIR --ids IDS.json [--max-new-tokens N] [--num-beams K]\n"
         "                       [generation options] [--out OUT.json] [--threads N] [--progress]\n"
         "\n"
         "Generates from each row of IDS.json (an array of ids, or an array of arrays: a batch of documents of\n"
         "different lengths). Prints one line per returned sequence (num_return_sequences per input row, rows\n"
         "in input order): a JSON array of ids starting with the decoder start token and ending with eos when\n"
         "generation stopped there, as Hugging Face returns them; --out also writes them all as one JSON array\n"
         "of arrays.\n"
         "\n") + model_help + "\n" + generation_help,
         joined({{"model", "ids", "out"}, model_valued, generation_valued}), {"progress", "do-sample"}, run_generate},
        {"summarize",
         std::string("usage: locost summarize --model DIR --input FILE.txt [--tokenizer SPM] [generation options]\n"
         "                        [--threads N] [--progress]\n"
         "\n"
         "Tokenizes FILE.txt ('-' reads stdin; SentencePiece: DIR/spiece.model or --tokenizer; </s> appended),\n"
         "encodes the whole text in one pass, generates, and prints the decoded text to stdout (one line per\n"
         "returned sequence). On stderr: progress (encoder layers, cross-attention cache, decoding steps) when\n"
         "stderr is a terminal or with --progress, and a closing line with the input tokens, encode tokens/s,\n"
         "decode ms/token and peak memory.\n"
         "\n") + model_help + "\n" + generation_help,
         joined({{"model", "input", "tokenizer"}, model_valued, generation_valued}), {"progress", "do-sample"}, run_summarize},
    };
    return all;
}

} // namespace locost::cli

#include "cmd_demo_checkpoint.hpp"
#include "cmd_encode.hpp"
#include "cmd_inspect.hpp"
#include "cmd_seq2seq.hpp"
