// The locost subcommands. Each entry: its name, its --help text, the options it takes
// (valued and boolean), and the function that runs it.
#pragma once
#include <locost/locost.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "args.hpp"
#include "budget.hpp"
#include "device.hpp"
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
int run_chunks(const args& a);
int run_tokenize(const args& a);
int run_detokenize(const args& a);
int run_serve(const args& a);
int run_eval(const args& a);
std::string serve_help();
std::set<std::string> serve_valued();
std::set<std::string> serve_flags();

// demo-checkpoint's --help: the families and their shapes from the registry.
inline std::string demo_checkpoint_help() {
    std::string bar, names, spm, bpe;
    const auto all = models::families::names();
    for (std::size_t i = 0; i < all.size(); ++i) {
        bar += (i ? "|" : "") + all[i];
        names += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i] + (i == 0 ? " (default)" : "");
        // Which tokenizer the family's demo ships with.
        const auto plan = models::demo_plan_of(all[i], "tiny", 16000, "transient-global");
        std::string& list = plan.byte_bpe ? bpe : spm;
        list += (list.empty() ? "" : ", ") + std::string(plan.label);
    }
    // Each family's shapes, wrapped at 104 columns under its name.
    std::string shapes;
    for (const auto& text : models::families::demo_shapes()) {
        std::string line = std::string(24, ' ');
        std::size_t at = 0;
        while (at < text.size()) {
            std::size_t end = text.find(' ', at);
            if (end == std::string::npos) end = text.size();
            if (line.size() + (end - at) > 104 && line.size() > 26) {
                shapes += line + "\n";
                line = std::string(26, ' ');
            }
            line += text.substr(at, end - at) + " ";
            at = end + 1;
        }
        line.pop_back();
        shapes += line + "\n";
    }
    // clang-format off
    return "usage: locost demo-checkpoint [--family " + bar + "] --config base|tiny\n"
           "                              --out DIR [--seed S] [--spm FILE | --bpe DIR] [--encoder-attention-type A]\n"
           "\n"
           "Writes a checkpoint of seeded random, UNTRAINED weights (initialised like the family's original\n"
           "code), its config.json, its tokenizer (spiece.model; " + bpe + ": vocab.json + merges.txt) and a README\n"
           "saying what it is. Useful to exercise and measure the software; what it generates is not meaningful.\n"
           "\n"
           "  --family F          " + names + "\n"
           "  --config base|tiny  the shape: each family's base (below); tiny: d_model 64, d_ff 128, 2+2 layers,\n"
           "                      4 heads, the vocabulary of the tokenizer (16000 for the defaults), and:\n" +
           shapes +
           "  --out DIR           output directory (created; existing checkpoint files are replaced)\n"
           "  --seed S            random seed (default 0)\n"
           "  --spm FILE          SentencePiece model to copy in as spiece.model (" + spm + "; default:\n"
           "                      books-16k.model, installed with the tool in share/locost)\n"
           "  --bpe DIR           byte-level BPE vocab.json + merges.txt to copy in (" + bpe + "; default: the\n"
           "                      books-bpe vocabulary trained on public-domain books by train_bpe, installed\n"
           "                      with the tool in share/locost)\n"
           "  --encoder-attention-type A   LongT5: transient-global (default, long-t5-tglobal) or local\n";
    // clang-format on
}

inline const std::vector<command>& commands() {
    static const std::vector<command> all = {
        {"inspect",
         "usage: locost inspect --model DIR [--tokenizer T] [--generation-config FILE] [--task NAME] [--json]\n"
         "       locost inspect --device cuda [--model DIR] [--json]\n"
         "       locost inspect --system [--threads N] [--json]\n"
         "\n"
         "Shows the model type and the family's key config values of the checkpoint in DIR (config.json plus\n"
         "model.safetensors, a sharded model.safetensors.index.json, or pytorch_model.bin), every\n"
         "tensor (name, dtype, shape, source file), the parameter count, and whether the tensors\n"
         "match what the config requires; the tokenizer text commands would use, and every generation\n"
         "setting generate and summarize would use with the source of each (generation_config.json,\n"
         "config.json, --generation-config, --task, or transformers' default). Exits 1 when the\n"
         "checkpoint does not validate.\n"
         "\n"
         "--system shows the machine instead: the CPU and its vector features, which library runs the\n"
         "float32 products (OpenBLAS, oneDNN or Eigen) and why, the kernel each picked, and each one's\n"
         "GFLOP/s at an encoder's shape beside the machine's FMA peak (about 1.5 s of measuring).\n"
         "LOCOST_GEMM=auto|openblas|onednn|eigen overrides the choice.\n"
         "\n"
         "  --model DIR   checkpoint directory, or ORG/NAME[@REVISION] from the Hugging Face cache\n"
         "  --backbone B  a SLED checkpoint that ships no weights: its backbone's (DIR or ORG/NAME)\n"
         "  --cache-dir D the Hugging Face cache to find ORG/NAME in (default: $HF_HUB_CACHE, $HF_HOME/hub,\n"
         "                ~/.cache/huggingface/hub)\n"
         "  --tokenizer T  the tokenizer for a repository that ships none (SPM file, DIR or ORG/NAME)\n"
         "  --generation-config FILE  generation defaults from FILE instead of generation_config.json\n"
         "  --task NAME   with config.json's task_specific_params[NAME] over them (e.g. summarization)\n"
         "  --json        print one JSON object instead of text\n"
         "  --device D    cpu (default) or cuda: also print the GPUs the CUDA runtime sees, with their free\n"
         "                memory (without a GPU, or in a tool built without CUDA: an error saying so)\n"
         "  --system      the machine and its GEMM providers instead of a checkpoint\n"
         "  --threads N   with --system: measure with N threads (default: all)\n",
         {"model", "backbone", "cache-dir", "device", "tokenizer", "generation-config", "task", "threads"},
         {"json", "system"},
         run_inspect},
        {"demo-checkpoint",
         demo_checkpoint_help(),
         {"family", "config", "out", "seed", "spm", "bpe", "encoder-attention-type"},
         {},
         run_demo_checkpoint},
        {"encode",
         std::string("usage: locost encode --model DIR (--ids IDS.json | --input FILE.txt [--tokenizer SPM|DIR])\n"
                     "                     --out OUT.safetensors [--threads N] [--progress] [SLED options]\n"
                     "\n"
                     "Runs the checkpoint's encoder (any family; through SLED with --sled-context or a SLED checkpoint) and\n"
                     "writes one float32 tensor `last_hidden_state` of shape (B, L, d_model) to OUT (SLED with\n"
                     "--no-encode-prefix: (B, L - prefix, d_model); positions that are padding in every chunk are zero).\n"
                     "\n"
                     "  --model DIR        checkpoint directory (config.json + weights, optional tokenizer files), or\n"
                     "                     ORG/NAME[@REVISION] from the Hugging Face cache (never downloaded)\n"
                     "  --ids IDS.json     a JSON array of token ids, or an array of arrays (a batch; shorter\n"
                     "                     rows are padded with pad_token_id and masked)\n"
                     "  --input FILE.txt   text to tokenize ('-' reads stdin); the tokenizer's conventions (T5: </s> appended)\n"
                     "  --tokenizer SPM|DIR  SentencePiece model or tokenizer directory, or ORG/NAME from the Hugging Face cache\n"
                     "                     (default: the checkpoint's)\n"
                     "  --out FILE         output safetensors file\n"
                     "  --progress         show progress on stderr even when it is not a terminal\n") +
             budget_help() + device_help() + model_help(),
         joined({{"model", "ids", "input", "tokenizer", "out"}, model_valued, budget_valued, device_valued}),
         joined({{"progress"}, model_flags, budget_flags}), run_encode},
        {"score",
         std::string("usage: locost score --model DIR --ids IDS.json --decoder-ids DEC.json --out OUT.safetensors\n"
                     "                    [--threads N] [--progress]\n"
                     "\n"
                     "Teacher forcing: writes the float32 `logits` (B, T, vocab) of the decoder inputs DEC.json given the\n"
                     "encoder inputs IDS.json. IDS.json and DEC.json are each an array of ids (B = 1) or an array of arrays\n"
                     "(a batch; IDS rows may differ in length and are padded and masked; DEC rows must be of equal length,\n"
                     "each starting with the decoder start token, 0 for LOCOST/T5).\n"
                     "\n") +
             budget_help() + device_help() + model_help(),
         joined({{"model", "ids", "decoder-ids", "out"}, model_valued, budget_valued, device_valued}),
         joined({{"progress"}, model_flags, budget_flags}), run_score},
        {"generate",
         std::string("usage: locost generate --model DIR --ids IDS.json [--max-new-tokens N] [--num-beams K]\n"
                     "                       [generation options] [--out OUT.json] [--threads N] [--progress]\n"
                     "\n"
                     "Generates from each row of IDS.json (an array of ids, or an array of arrays: a batch of documents of\n"
                     "different lengths). Prints one line per returned sequence (num_return_sequences per input row, rows\n"
                     "in input order): a JSON array of ids starting with the decoder start token and ending with eos when\n"
                     "generation stopped there, as Hugging Face returns them; --out also writes them all as one JSON array\n"
                     "of arrays.\n"
                     "\n") +
             budget_help() + device_help() + model_help() + "\n" + generation_help(),
         joined({{"model", "ids", "out"}, model_valued, generation_valued, budget_valued, device_valued}),
         joined({{"progress"}, generation_flags, model_flags, budget_flags}), run_generate},
        {"summarize",
         std::string("usage: locost summarize --model DIR --input FILE.txt [--tokenizer SPM|DIR] [--prefix TEXT]\n"
                     "                        [generation options] [--threads N] [--progress] [SLED options]\n"
                     "\n"
                     "Tokenizes FILE.txt ('-' reads stdin; the checkpoint's tokenizer or --tokenizer, with its conventions:\n"
                     "T5 appends </s>), encodes the whole text in one pass (through SLED with --sled-context or a SLED\n"
                     "checkpoint: chunk by chunk), generates, and prints the decoded text to stdout (one line per\n"
                     "returned sequence). On stderr: progress (encoder layers, cross-attention cache, decoding steps) when\n"
                     "stderr is a terminal or with --progress, and a closing line with the input tokens, encode tokens/s,\n"
                     "decode ms/token and peak memory.\n"
                     "\n"
                     "  --prefix TEXT      a question or instruction, tokenized like the input and put in front of it;\n"
                     "                     through SLED it is prepended to every chunk and encoded alone first\n"
                     "\n"
                     "Corpus jobs: locost summarize --model DIR --inputs LIST --out results.jsonl [--shard K/N] [--resume]\n"
                     "                                [--max-batch-tokens N]\n"
                     "  --inputs LIST      documents to summarize with the model loaded once: a text file of paths (one per\n"
                     "                     line; '#' lines skipped) or JSON lines {\"id\": ..., \"path\": ...}; relative paths\n"
                     "                     are relative to LIST's directory\n"
                     "  --out FILE         results, one JSON line per document: {id, path, summary, input_tokens, new_tokens,\n"
                     "                     encode_s, decode_s, peak_rss_bytes}, or {id, path, error: {id, message}} (the job goes\n"
                     "                     on; exit 1 at the end if any failed); lines are appended whole and fsync'ed\n"
                     "  --shard K/N        only documents i with i mod N = K (0 <= K < N): worker K of N (a Slurm array task or\n"
                     "                     a Kubernetes Indexed Job index); the results are the N files concatenated\n"
                     "  --resume           continue FILE: skip ids already summarized there (errors are retried; a torn last\n"
                     "                     line is removed); without it an existing FILE is refused\n"
                     "  --max-batch-tokens N  run documents in batches of at most N padded tokens (documents x longest),\n"
                     "                     grouped by length within windows of 256 documents: many short documents go several\n"
                     "                     times faster; each document's summary is that of its own run. Lines then come in\n"
                     "                     batch order, with the batch's time shared out and \"batch_documents\". Default 0:\n"
                     "                     one document at a time, in LIST order\n"
                     "\n") +
             budget_help() + device_help() + model_help() + "\n" + generation_help(),
         joined({{"model", "input", "inputs", "out", "shard", "max-batch-tokens", "tokenizer", "prefix"},
                 model_valued,
                 generation_valued,
                 budget_valued,
                 device_valued}),
         joined({{"progress", "resume"}, generation_flags, model_flags, budget_flags}), run_summarize},
        {"chunks",
         "usage: locost chunks --length N --context C --window-fraction F [--prefix-length P]\n"
         "\n"
         "Prints SLED's window plan for an input of N tokens whose first P are a prefix (default 0): one JSON\n"
         "array of objects {start, end, effective_start, effective_end}, in positions of the document after the\n"
         "prefix (0 = its first token). Each chunk reads [start, end) (C tokens, or the whole document when it is\n"
         "shorter) and keeps the states of [effective_start, effective_end); the kept ranges tile the document\n"
         "exactly once. The margin is int(C * (1 - F) / 2) tokens, as in the SLED code.\n"
         "\n"
         "  --length N            input length in tokens (prefix included)\n"
         "  --context C           chunk size in tokens (document part; the prefix comes on top)\n"
         "  --window-fraction F   the kept share of each chunk, in (0, 1]\n"
         "  --prefix-length P     prefix tokens at the start of the input (at most C)\n",
         {"length", "context", "window-fraction", "prefix-length"},
         {},
         run_chunks},
        {"tokenize",
         "usage: locost tokenize --model DIR --input FILE.txt\n"
         "\n"
         "Prints the token ids of FILE.txt as one JSON array on one line, with the checkpoint's conventions:\n"
         "tokenizer.json as Hugging Face's tokenizers runs it (its post-processor: T5 appends </s>, BART wraps in\n"
         "<s> ... </s>), else byte-level BPE (vocab.json + merges.txt: BART, RoBERTa) puts <s> first and </s> last,\n"
         "SentencePiece (spiece.model: T5, LOCOST) appends </s>. The file's bytes are the text, nothing stripped;\n"
         "bytes that are not UTF-8 read as U+FFFD.\n"
         "\n"
         "  --model DIR       checkpoint directory, or a directory of tokenizer files only (tokenizer.json,\n"
         "                    vocab.json + merges.txt with tokenizer_config.json etc., or spiece.model), or a\n"
         "                    SentencePiece model file, or ORG/NAME[@REVISION] from the Hugging Face cache\n"
         "  --input FILE.txt  the text ('-' reads stdin)\n"
         "  --cache-dir DIR   the Hugging Face cache to find ORG/NAME in (default: $HF_HUB_CACHE, ...)\n",
         {"model", "input", "cache-dir"},
         {},
         run_tokenize},
        {"detokenize",
         "usage: locost detokenize --model DIR --ids IDS.json\n"
         "\n"
         "Prints the text of the token ids in IDS.json, followed by one newline. Special tokens (<s>, </s>, <pad>,\n"
         "...) are skipped; ids past the tokenizer's vocabulary but below the model's (config.json's vocab_size,\n"
         "when DIR has one) are the model's extra ids and are skipped too; any other id is an error. Bytes that do\n"
         "not form UTF-8 become U+FFFD.\n"
         "\n"
         "  --model DIR       checkpoint directory, or a directory of tokenizer files only, or a SentencePiece model,\n"
         "                    or ORG/NAME[@REVISION] from the Hugging Face cache\n"
         "  --ids IDS.json    one JSON array of token ids, e.g. a line 'locost generate' printed ('-' reads stdin)\n"
         "  --cache-dir DIR   the Hugging Face cache to find ORG/NAME in (default: $HF_HUB_CACHE, ...)\n",
         {"model", "ids", "cache-dir"},
         {},
         run_detokenize},
        {"serve", serve_help(), serve_valued(), serve_flags(), run_serve},
        {"eval",
         std::string("usage: locost eval --model DIR --data FILE.jsonl [--out results.jsonl [--resume]] [--scores FILE.json]\n"
                     "                   [--max-batch-tokens N] [--rouge-stemmer porter|none] [generation options]\n"
                     "       locost eval --data FILE.jsonl --results results.jsonl [--scores FILE.json]\n"
                     "\n"
                     "Summarizes every document of a data set, as 'summarize --inputs' does (the checkpoint's summarization\n"
                     "settings, batches of --max-batch-tokens, one result line per document), and scores each summary against\n"
                     "its reference: ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum as Google's rouge-score computes them (its\n"
                     "tokenizer; Lsum over the lines of each text), their F-measure, precision and recall over the documents\n"
                     "with a bootstrap 95% interval; then the encoder's speed, the decoder's, and the peak memory. Prints a\n"
                     "table; exits 1 when a document could not be summarized (it is left out of the scores and counted).\n"
                     "\n"
                     "  --data FILE.jsonl  one JSON object per line: {\"id\": ..., \"document\": TEXT, \"summary\": REFERENCE},\n"
                     "                     or \"path\" (a text file, relative to FILE's directory) instead of \"document\"\n"
                     "  --out FILE         keep the results (the lines 'summarize --inputs' writes); with --resume, continue\n"
                     "                     them: documents already summarized there are scored, not run again\n"
                     "  --scores FILE      also write the figures as JSON (fractions, as rouge-score gives them)\n"
                     "  --results FILE     score the summaries of FILE instead of running a model: JSON lines {\"id\": ...,\n"
                     "                     \"summary\": TEXT}, as summarize --inputs writes them (a baseline's, another run's)\n"
                     "  --max-batch-tokens N  as summarize --inputs: documents in batches of at most N padded tokens\n") +
             options::help_text({options::group::eval}) + "\n" + budget_help() + device_help() + model_help() + "\n" + generation_help(),
         joined({{"model", "data", "out", "scores", "results", "max-batch-tokens", "tokenizer", "prefix"},
                 options::tool_names({options::group::eval}, false),
                 model_valued,
                 generation_valued,
                 budget_valued,
                 device_valued}),
         joined({{"progress", "resume"}, generation_flags, model_flags, budget_flags}), run_eval},
    };
    return all;
}

}  // namespace locost::cli

#include "cmd_chunks.hpp"
#include "cmd_demo_checkpoint.hpp"
#include "cmd_encode.hpp"
#include "cmd_inspect.hpp"
#include "cmd_seq2seq.hpp"
#include "cmd_tokenize.hpp"
#include "cmd_corpus.hpp"  // after cmd_seq2seq.hpp: it runs summarize per document
#include "cmd_serve.hpp"
#include "cmd_eval.hpp"  // after cmd_corpus.hpp: it runs the corpus job
