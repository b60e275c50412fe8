// locost's Python module (`import locost`): the library's models, generation and tokenizers
// behind a Python API, built from the same headers as the tool.
//
// Options arrive as keyword arguments under transformers' names (max_new_tokens, num_beams, ...)
// and are checked and applied by the library's option table (locost/options/): the records the
// tool's flags come from, read here as typed values, so a default comes from
// generation_config.json and a bound is the same as with `locost`; an error names the keyword
// (python.bad_argument: "summarize: argument 'num_beams' expects an integer in [1, ...], got 0").
// Checkpoints and texts go through the tool's readers (tools/locost/input.hpp, budget.hpp).
//
// Every call releases the GIL while it computes; callbacks (progress, streaming) take it back
// briefly, and check for signals there, so that Ctrl-C interrupts a long encode or decode. Calls
// on one Model are serialized by its lock (a model's scratch is not shared between threads);
// two Models run side by side.
//
// The parts: module/arguments.hpp (keyword arguments and the option table), computing.hpp (the
// GIL, signals, progress), results.hpp, model.hpp (locost.Model), stream.hpp (generate_tokens);
// the bindings and the errors' translation here.
#include "module/stream.hpp"

namespace {

using namespace locost;
using locost::python::model;

PyObject* error_type = nullptr;
// Subclasses of locost.Error that are also the built-in exception a Python user catches for that
// kind of failure (a bad argument is a ValueError, an unknown keyword a TypeError, a missing or
// unreadable file an OSError, memory a MemoryError), chosen by the id's family.
PyObject *argument_error_type = nullptr, *keyword_error_type = nullptr, *file_error_type = nullptr, *memory_error_type = nullptr;

PyObject* python_type_of(const std::string& id) {
    auto starts = [&](const char* p) { return id.rfind(p, 0) == 0; };
    if (id == "python.unknown_argument") return keyword_error_type;
    if (starts("python.") || starts("generate.") || starts("input.") || starts("cli.") || starts("eval.")) return argument_error_type;
    if (starts("memory.") || id == "system.out_of_memory" || id == "cuda.out_of_memory") return memory_error_type;
    if (starts("checkpoint.") || starts("io.") || starts("hub.") || id == "tokenizer.not_found" || id == "tool.data_not_found")
        return file_error_type;
    return error_type;
}

// generate_tokens needs the shared_ptr that owns the model (the stream keeps it alive).
std::shared_ptr<model::token_stream> make_stream(const std::shared_ptr<model>& self, const py::object& text, const py::object& prefix,
                                                 const py::kwargs& kw);

}  // namespace

PYBIND11_MODULE(_locost, m) {
    m.doc() = "locost: long-document summarization (LOCOST, SLED, LongT5, LED, Pegasus-X, T5, BART) on the CPU, from Python.";
    m.attr("__version__") = LOCOST_VERSION_STRING;
    m.def(
        "kernels",
        [] {
            py::dict d;
            d["level"] = std::string(locost::isa_level_name(locost::kernels_isa()));
            d["cpu_level"] = std::string(locost::isa_level_name(locost::cpu_isa()));
            d["compiled_level"] = std::string(locost::isa_level_name(locost::compiled_isa_level()));
            return d;
        },
        "The level of locost's CPU kernels, as `locost inspect --system --json` reports it: {'level': what runs, "
        "'cpu_level': this CPU's, 'compiled_level': what this build was compiled for}; LOCOST_ISA may lower 'level'. "
        "Raises locost.Error (ids isa.*) for a LOCOST_ISA this CPU or build cannot run, as Model() does.");
    // multiprocessing's workers (fork) start with no OpenMP pool to wait for (fork_safety.hpp).
    locost::release_openmp_pool_at_fork();

    error_type = PyErr_NewExceptionWithDoc(
        "locost.Error",
        "What locost refuses or cannot do. `.id` is the stable id of the C++ library's locost::error (for example "
        "'checkpoint.not_in_cache', 'memory.over_budget', 'generate.invalid_option'); `.message` its message; str() gives both. "
        "Its subclasses ArgumentError (ValueError), KeywordError (TypeError), FileError (OSError) and OutOfMemoryError "
        "(MemoryError) let a caller catch a failure as the built-in exception of its kind.",
        PyExc_Exception, nullptr);
    m.add_object("Error", py::handle(error_type));
    auto subclass = [&](const char* name, PyObject* builtin, const char* doc) {
        py::object bases = py::make_tuple(py::handle(error_type), py::handle(builtin));
        PyObject* t = PyErr_NewExceptionWithDoc(("locost." + std::string(name)).c_str(), doc, bases.ptr(), nullptr);
        m.add_object(name, py::handle(t));
        return t;
    };
    argument_error_type = subclass("ArgumentError", PyExc_ValueError,
                                   "locost.Error that is a ValueError: an argument, option or input text locost refuses "
                                   "(ids python.bad_argument, generate.*, input.*).");
    keyword_error_type = subclass("KeywordError", PyExc_TypeError,
                                  "locost.Error that is a TypeError: a keyword argument the call does not take (python.unknown_argument).");
    file_error_type = subclass("FileError", PyExc_OSError,
                               "locost.Error that is an OSError: a checkpoint, tokenizer or file that is missing or cannot be read "
                               "(checkpoint.*, io.*, hub.*, tokenizer.not_found).");
    memory_error_type = subclass("OutOfMemoryError", PyExc_MemoryError,
                                 "locost.Error that is a MemoryError: a request over the memory budget, or an allocation that failed "
                                 "(memory.*, system.out_of_memory, cuda.out_of_memory).");
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const locost::error& e) {
            PyObject* type = python_type_of(e.id());
            py::object inst = py::reinterpret_steal<py::object>(PyObject_CallFunction(type, "s", e.what()));
            if (!inst) return;  // the call set its own error
            inst.attr("id") = e.id();
            inst.attr("message") = e.message();
            PyErr_SetObject(type, inst.ptr());
        }
    });

    py::class_<python::token_event>(m, "Token", "One decoded token of generate_tokens().")
        .def_readonly("id", &python::token_event::id, "the token id")
        .def_readonly("text", &python::token_event::text,
                      "the text this token adds to the output (the texts of all tokens join to summarize()'s text; empty for a special "
                      "token or while a character is incomplete)")
        .def_readonly("step", &python::token_event::step, "0 for the first new token")
        .def_readonly("is_last", &python::token_event::is_last, "True for the last token (eos or the length limit)")
        .def_readonly("logprob", &python::token_event::logprob,
                      "the token's log-probability under the distribution it was chosen from (the scores after repetition "
                      "penalty, no-repeat n-grams, temperature, top-k/top-p, log-softmaxed: transformers' "
                      "compute_transition_scores(..., normalize_logits=True))")
        .def("__repr__",
             [](const python::token_event& t) {
                 char lp[32];
                 std::snprintf(lp, sizeof lp, "%.4f", static_cast<double>(t.logprob));
                 return "Token(id=" + std::to_string(t.id) + ", text=" + py::repr(py::str(t.text)).cast<std::string>() +
                     ", step=" + std::to_string(t.step) + ", logprob=" + lp + (t.is_last ? ", is_last=True)" : ")");
             })
        .def("__eq__",
             [](const python::token_event& a, const python::token_event& b) {
                 return a.id == b.id && a.text == b.text && a.step == b.step && a.is_last == b.is_last && a.logprob == b.logprob;
             })
        // Pickled as its fields (a multiprocessing.Pool returns them from its workers).
        .def(py::pickle([](const python::token_event& t) { return py::make_tuple(t.id, py::bytes(t.text), t.step, t.is_last, t.logprob); },
                        [](const py::tuple& s) {
                            if (py::len(s) != 5) throw error("python.bad_argument", "Token: a pickled Token has 5 fields");
                            python::token_event t;
                            t.id = s[0].cast<std::int64_t>();
                            t.text = s[1].cast<std::string>();
                            t.step = s[2].cast<index_t>();
                            t.is_last = s[3].cast<bool>();
                            t.logprob = s[4].cast<float>();
                            return t;
                        }));

    py::class_<python::summary>(m, "Summary", "summarize(..., details=True): a summary with its ids, score and timings.")
        .def_readonly("text", &python::summary::text)
        .def_readonly("ids", &python::summary::ids, "the generated ids, starting with the decoder start token")
        .def_readonly("score", &python::summary::score, "beam search: the sequence score (transformers' sequences_scores); None otherwise")
        .def_readonly("input_tokens", &python::summary::input_tokens, "tokens of the input (with the prefix)")
        .def_readonly("steps", &python::summary::steps, "decoding steps of the batch")
        .def_readonly("encode_seconds", &python::summary::encode_seconds, "the batch's encode, cross-attention cache included")
        .def_readonly("decode_seconds", &python::summary::decode_seconds, "the batch's decoding")
        .def("__repr__", [](const python::summary& s) { return "Summary(text=" + py::repr(py::str(s.text)).cast<std::string>() + ")"; })
        .def("__eq__",
             [](const python::summary& a, const python::summary& b) {
                 return a.text == b.text && a.ids == b.ids && a.score == b.score && a.input_tokens == b.input_tokens &&
                     a.steps == b.steps && a.encode_seconds == b.encode_seconds && a.decode_seconds == b.decode_seconds;
             })
        .def(py::pickle(
            [](const python::summary& s) {
                return py::make_tuple(py::bytes(s.text), s.ids, s.score, s.input_tokens, s.steps, s.encode_seconds, s.decode_seconds);
            },
            [](const py::tuple& t) {
                if (py::len(t) != 7) throw error("python.bad_argument", "Summary: a pickled Summary has 7 fields");
                python::summary s;
                s.text = t[0].cast<std::string>();
                s.ids = t[1].cast<std::vector<std::int64_t>>();
                s.score = t[2].cast<std::optional<double>>();
                s.input_tokens = t[3].cast<index_t>();
                s.steps = t[4].cast<index_t>();
                s.encode_seconds = t[5].cast<double>();
                s.decode_seconds = t[6].cast<double>();
                return s;
            }));

    py::class_<model::token_stream, std::shared_ptr<model::token_stream>>(
        m, "TokenStream", "The iterator generate_tokens() returns. Leaving the loop early (or close()) stops the decoding.")
        .def("__iter__", [](const std::shared_ptr<model::token_stream>& s) { return s; })
        .def("__next__", &model::token_stream::next)
        .def("close", &model::token_stream::close, "Stops the decoding and waits for it.")
        .def("__enter__", [](const std::shared_ptr<model::token_stream>& s) { return s; })
        .def("__exit__", [](model::token_stream& s, py::args) { s.close(); });

    py::class_<text::tokenizer>(m, "Tokenizer",
                                "A checkpoint's tokenizer with its family's conventions (T5: </s> appended): a checkpoint directory, a "
                                "repository id in the Hugging Face cache, or a SentencePiece model file.")
        .def(py::init([](const py::object& path_or_name, const py::object& revision, const py::object& cache_dir) {
                 auto text_of = [](const py::object& v, const std::string& what) {
                     const bool path_like = !py::isinstance<py::str>(v) && py::hasattr(v, "__fspath__");
                     return locost::python::utf8_of(path_like ? py::module_::import("os").attr("fspath")(v) : v, what, /*path=*/true);
                 };
                 const std::string path =
                     locost::python::with_revision(text_of(path_or_name, "Tokenizer: argument 'path_or_name'"), revision, "Tokenizer");
                 io::cache_location cache;
                 if (!cache_dir.is_none()) cache = {text_of(cache_dir, "Tokenizer: argument 'cache_dir'"), "cache_dir"};
                 py::gil_scoped_release nogil;
                 return cli::tokenizer_at(path, cache);
             }),
             py::arg("path_or_name"), py::kw_only(), py::arg("revision") = py::none(), py::arg("cache_dir") = py::none())
        .def(
            "encode",
            [](const text::tokenizer& t, const py::object& s) {
                return t.encode(locost::python::utf8_of(s, "Tokenizer.encode: the text"));
            },
            py::arg("text"), "text → ids")
        .def(
            "decode",
            [](const text::tokenizer& t, const py::object& ids, int model_vocab) {
                std::vector<int> v;
                for (const auto& i : py::reinterpret_borrow<py::sequence>(ids)) v.push_back(i.cast<int>());
                return t.decode(v, model_vocab);
            },
            py::arg("ids"), py::arg("model_vocab") = 0,
            "ids → text; special tokens are skipped (ids below model_vocab but past the pieces too)")
        .def_property_readonly("vocab_size", &text::tokenizer::vocab_size)
        .def_property_readonly("path", &text::tokenizer::path);

    static const std::string model_doc = std::string(R"doc(An encoder-decoder checkpoint loaded on the CPU or a GPU.

Model(path_or_name, *, device="cpu", threads=None, weights="float32", compute="float32",
      cross_attention="cached", memory_budget=None, sled=None, revision=None, cache_dir=None,
      **options)

path_or_name: a checkpoint directory (config.json + weights, as transformers writes it) or a
repository id 'org/name[@revision]' in the Hugging Face cache (or revision="..." as
from_pretrained takes it; cache_dir: that cache instead of $HF_HUB_CACHE, $HF_HOME/hub or
~/.cache/huggingface/hub, as from_pretrained's); a str or os.PathLike; any family locost reads (LOCOST,
T5, BART, LED, LongT5, Pegasus-X; a "tau/sled" config runs its backbone through SLED).
device: "cpu" or "cuda" (the first GPU; a module built with -DLOCOST_CUDA=ON, else the error
device.no_cuda_build): the same results as the CPU within float32 rounding.
threads: the OpenMP threads of each call (None: all). weights: float32 | bfloat16 | int8, the
decoder's per-step weights. compute: float32 | bfloat16 | int8, the encoder's products (fp32, f32 and bf16 name them too).
cross_attention: cached | folded. memory_budget: bytes (int) or a size such as "8G"; each call
is refused before it allocates when its estimate exceeds it (default: the memory available then).
sled: dict(context=256, window_fraction=0.5, encode_prefix=True) runs the encoder through SLED.
)doc" + locost::python::model_options_doc());
    py::class_<model, std::shared_ptr<model>>(m, "Model", model_doc.c_str())
        .def(py::init<const py::object&, const py::object&, py::object, const py::object&, const py::object&, const py::object&, py::object,
                      py::object, const py::object&, const py::object&, py::kwargs>(),
             py::arg("path_or_name"), py::kw_only(), py::arg("device") = "cpu", py::arg("threads") = py::none(),
             py::arg("weights") = "float32", py::arg("compute") = "float32", py::arg("cross_attention") = "cached",
             py::arg("memory_budget") = py::none(), py::arg("sled") = py::none(), py::arg("revision") = py::none(),
             py::arg("cache_dir") = py::none())
        .def("summarize", &model::summarize, py::arg("text"), py::kw_only(), py::arg("prefix") = py::none(), py::arg("details") = false,
             py::arg("max_batch_tokens") = 0, py::arg("progress") = py::none(),
             R"doc(Summarizes a text (→ str) or a list of texts in one batch (→ list of str).

A list's texts are encoded one at a time and decoded together, so each text's summary is that of
its own run. max_batch_tokens: batches of texts grouped by length, each at most this many padded
tokens (texts × longest), instead of one batch of all: many short texts run several times faster
than one by one, with the memory of one batch at a time. Results come back in the order given.

prefix: a question put before the document (before every chunk with SLED). details=True returns
Summary objects (text, ids, score, timings). num_return_sequences > 1 gives a list per text.
The checkpoint's summarization settings apply (config.json's task_specific_params["summarization"],
its prefix included), as transformers' summarization pipeline applies them; a summary that stops at
transformers' bare default length (max_length 20) says so in a UserWarning, once.
progress: a callable (phase, done, total); True for a bar per phase (tqdm.auto: a widget in
Jupyter; lines on sys.stderr without tqdm); None (default) for the same bars once the call has run
2 s in an interactive session (a terminal, a Jupyter kernel); False for none.
Ctrl-C interrupts the call (KeyboardInterrupt). Generation options: see Model.)doc")
        .def("evaluate", &model::evaluate, py::arg("data"), py::kw_only(), py::arg("prefix") = py::none(), py::arg("max_batch_tokens") = 0,
             py::arg("progress") = py::none(),
             R"doc(Summarizes a data set and scores the summaries with ROUGE against its references, as `locost eval`.

data: a JSON-lines file (str or os.PathLike; {"id", "document", "summary"} per line, or "path" instead of
"document"), or a list of (document, reference) pairs or of dicts with "document" and "summary".
rouge_stemmer: "porter" (default; rouge-score's use_stemmer=True) or "none". bootstrap_samples: the
resamples behind each 95% interval (default 1000). Generation options and max_batch_tokens as summarize.

Returns a dict: {"documents", "summarized", "failed", "rouge": {"rouge1"|"rouge2"|"rougeL"|"rougeLsum":
{"fmeasure"|"precision"|"recall": {"low", "mid", "high"}}}, "use_stemmer", "bootstrap_samples", "speed":
{...}, "peak_rss_bytes", "summaries": [the generated texts, in the data's order]}; scores are fractions
(0..1) as rouge-score gives them.)doc")
        .def("generate_tokens", &make_stream, py::arg("text"), py::kw_only(), py::arg("prefix") = py::none(),
             R"doc(Streams the summary of one text: an iterator of Token objects (id, text, step, is_last) as they are decoded.

text: a str, or one row of ids (a list or a 1-D integer array; Token.text is then empty when the
checkpoint has no tokenizer). Leaving the loop early stops the decoding. Greedy or sampling only
(num_beams=1). Generation options: see Model.)doc")
        .def("generate", &model::generate, py::arg("ids"), py::kw_only(), py::arg("prefix_length") = 0, py::arg("progress") = py::none(),
             R"doc(Generates from token ids: a list of id lists (ragged: padded and masked) or a 2-D integer array.

Returns a list of id sequences (documents × num_return_sequences, each starting with the decoder
start token, padded to one length), as transformers' generate(). prefix_length (SLED): the first
ids of every row are a question put before every chunk.)doc")
        .def("encode", &model::encode, py::arg("ids"), py::kw_only(), py::arg("prefix_length") = 0, py::arg("progress") = py::none(),
             "The encoder's states, a float32 array (batch, length, d_model) (no copy); padding positions hold the model's "
             "values there, compare where the row has ids.")
        .def("score", &model::score, py::arg("ids"), py::arg("labels"), py::kw_only(), py::arg("prefix_length") = 0,
             py::arg("progress") = py::none(),
             R"doc(Log-probabilities of given target ids, as CTranslate2's score_batch: a list with one float32 array per row.

labels: one list of target ids per row of ids (without the decoder start token; rows may differ in
length). Row b's value t is log p(labels[b][t] | labels[b][:t], ids[b]): the decoder reads the
start token then the labels, as transformers does with labels=. Their sum is the target's
log-likelihood.)doc")
        .def("logits", &model::logits, py::arg("ids"), py::arg("decoder_ids"), py::kw_only(), py::arg("prefix_length") = 0,
             py::arg("progress") = py::none(),
             "Teacher-forced logits of decoder inputs given as they are (starting with the decoder start token), a float32 array "
             "(batch, decoder length, vocab).")
        .def("close", &model::close,
             "Frees the model's memory now (weights, working memory, open token streams), and gives it back to the system; later "
             "calls raise locost.ArgumentError with id python.closed. A with block closes the model at its end.")
        .def("__enter__", [](const std::shared_ptr<model>& self) { return self; })
        .def("__exit__", [](model& self, py::args) { self.close(); })
        .def("estimate", &model::estimate, py::arg("input") = py::none(), py::kw_only(), py::arg("length") = py::none(),
             py::arg("batch") = 1,
             R"doc(The memory a summarize/generate call would need, per phase, before any work (what `locost --dry-run` prints).

input: a text, a list of texts or ids; or length=N (and batch=B). Generation options as for
summarize. Returns a dict: peak_bytes, peak_phase, phases (name, bytes, items), budget_bytes,
budget_source, fits, table.)doc")
        .def("tokenize", &model::tokenize, py::arg("text"), "text → ids with the checkpoint's tokenizer and its family's conventions")
        .def("decode", &model::decode, py::arg("ids"), "ids → text (special tokens skipped)")
        .def("generation_settings", &model::generation_settings,
             "The generation options summarize() with these arguments would use, with the checkpoint's defaults and its "
             "summarization settings: {name: value} (None where unset).")
        .def_property_readonly("tokenizer", [](model& self) { return self.tokenizer(); })
        .def_property_readonly("path", &model::path, "the checkpoint directory")
        .def_property_readonly("family", &model::family, "the model family ('t5', 'bart', 'locost', ...)")
        .def_property_readonly("is_sled", &model::is_sled)
        .def_property_readonly("config",
                               [](const model& self) {
                                   const auto& c = self.config();
                                   return py::dict(py::arg("model_type") = c.model_type, py::arg("vocab_size") = c.vocab_size,
                                                   py::arg("d_model") = c.d_model, py::arg("num_layers") = c.num_layers,
                                                   py::arg("num_decoder_layers") = c.num_decoder_layers, py::arg("num_heads") = c.num_heads,
                                                   py::arg("d_ff") = c.d_ff, py::arg("pad_token_id") = c.pad_token_id,
                                                   py::arg("decoder_start_token_id") = c.decoder_start_token_id);
                               })
        .def("__repr__", [](const model& self) {
            return "locost.Model(" + py::repr(py::str(self.path())).cast<std::string>() + ", family='" + self.family() + "')";
        });
}

namespace {
std::shared_ptr<model::token_stream> make_stream(const std::shared_ptr<model>& self, const py::object& text, const py::object& prefix,
                                                 const py::kwargs& kw) {
    return self->stream(self, text, prefix, kw);
}
}  // namespace
