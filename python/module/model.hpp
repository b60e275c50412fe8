// locost.Model: a checkpoint loaded once, its calls (summarize, generate, encode, score,
// estimate, tokenize) under the model's lock and without the GIL.
#pragma once
#include "arguments.hpp"
#include "computing.hpp"
#include "device_model.hpp"
#include "results.hpp"

#include <malloc.h>

namespace locost::python {

class model {
public:
    model(const py::object& path_or_name, const py::object& device_arg, py::object threads, const py::object& weights_arg,
          const py::object& compute_arg, const py::object& cross_attention_arg, py::object memory_budget, py::object sled,
          const py::object& revision, const py::object& cache_dir, py::kwargs extra) {
        (void)kernels_isa();  // a LOCOST_ISA this CPU or build cannot run is an error here, as at the tool's start
        std::vector<std::pair<std::string, py::object>> kw = {{"device", device_arg},
                                                              {"threads", threads},
                                                              {"weights", weights_arg},
                                                              {"compute", compute_arg},
                                                              {"cross_attention", cross_attention_arg},
                                                              {"memory_budget", memory_budget},
                                                              {"cache_dir", cache_dir}};
        // sled=dict(context=256, window_fraction=0.5, encode_prefix=True): the SLED options.
        if (!sled.is_none()) {
            if (!py::isinstance<py::dict>(sled))
                throw error("python.bad_argument",
                            "Model: argument 'sled' expects a dict such as dict(context=256, window_fraction=0.5), got " + repr_of(sled));
            for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(sled)) {
                const std::string key = utf8_of(py::str(k), "Model: a key of 'sled'");
                if (key == "context") kw.emplace_back("sled_context", py::reinterpret_borrow<py::object>(v));
                else if (key == "window_fraction") kw.emplace_back("sled_window_fraction", py::reinterpret_borrow<py::object>(v));
                else if (key == "encode_prefix") {
                    if (!py::isinstance<py::bool_>(v))
                        throw error("python.bad_argument", "Model: sled's 'encode_prefix' expects True or False, got " + repr_of(v));
                    kw.emplace_back("no_encode_prefix", py::bool_(!v.cast<bool>()));
                } else
                    throw error("python.unknown_argument",
                                "Model: sled has no setting '" + io::detail::printable(key, 64) +
                                    "' (it takes: context, window_fraction, encode_prefix)");
            }
        }
        for (const auto& [k, v] : extra)
            kw.emplace_back(utf8_of(py::str(k), "Model: an argument's name"), py::reinterpret_borrow<py::object>(v));
        base_ = std::make_unique<options::given>(given_of("Model", kw, model_records()));
        // A str or an os.PathLike (pathlib.Path), as open() takes one.
        const bool path_like = !py::isinstance<py::str>(path_or_name) && py::hasattr(path_or_name, "__fspath__");
        const py::object path = path_like ? py::module_::import("os").attr("fspath")(path_or_name) : path_or_name;
        const std::string name = utf8_of(path, "Model: argument 'path_or_name'", /*path=*/true);
        base_->set("model", with_revision(name, revision, "Model"));
        const cli::args& a = *base_;
        device_ = cli::read_device(a, "Model");
        if (device_ != device_kind::cpu) cli::cuda_devices();
        {
            computing nogil;
            ck_ = std::make_unique<io::checkpoint>(cli::open_checkpoint(a));
            mo_ = cli::read_model_options(a, "Model", *ck_);
            threads_ = a.integer<int>("threads", 0, 0, 1024);
            cfg_ = models::read_config(*ck_);
            models::require_matching_weights(*ck_, *cfg_);
            sled_ = models::sled_settings(*ck_, mo_).has_value();
            if (a.has("memory-budget")) budget_ = cli::read_memory_budget(a, "Model", device_);
            // What the loaded model itself holds: the estimate of a one-token request. The default
            // budget of a request is the memory available then plus this (already resident).
            models::memory_request r;
            r.decoder = true;
            r.decoder_positions = 1;
            r.device = device_;
            resident_ = models::estimate_memory(*cfg_, mo_, r).peak();
            check_budget(r, "Model");
            if (device_ == device_kind::cuda) model_ = load_cuda_model(*ck_, mo_);
            else model_ = std::make_unique<backend_model<cpu>>(models::load_model<float, cpu>(*ck_, mo_));
            // The tokenizer now, so that a first summarize does not pay for reading it; a checkpoint
            // without one (or with a broken one) is still a model for ids, and text calls say why.
            try {
                tokenizer();
            } catch (const error&) {}
        }
    }

    const models::model_config& config() const { return models::common(*cfg_); }
    std::string path() const { return ck_->dir(); }
    std::string family() const { return model_->family().name; }
    bool is_sled() const { return sled_; }

    text::tokenizer& tokenizer() {
        if (!tok_) tok_ = cli::open_tokenizer(*base_, *ck_, "Model");
        return *tok_;
    }

    // ---- calls ----

    // Each text's summaries and what its run took (its batch's timings, and its share of them:
    // the encode by tokens, the decode evenly, as a corpus job shares them out).
    struct doc_result {
        std::vector<std::vector<std::int64_t>> seqs;
        std::vector<double> scores;
        index_t input_tokens = 0, steps = 0;
        timings t;
        double encode_share_s = 0, decode_share_s = 0;
    };

    py::object summarize(const py::object& texts, const py::object& prefix, bool details, index_t max_batch_tokens, py::object progress,
                         const py::kwargs& kw) {
        const bool one = py::isinstance<py::str>(texts);
        std::vector<std::string> docs;
        if (one) docs.push_back(utf8_of(texts, "summarize: the text"));
        else {
            if (!py::isinstance<py::sequence>(texts))
                throw error("python.bad_argument",
                            "summarize: expects a text or a list of texts, got " + py::repr(texts).cast<std::string>());
            for (const auto& t : py::reinterpret_borrow<py::sequence>(texts)) {
                if (!py::isinstance<py::str>(t))
                    throw error("python.bad_argument",
                                "summarize: expects a list of texts (str), got an element " + py::repr(t).cast<std::string>());
                docs.push_back(utf8_of(t, "summarize: text " + std::to_string(docs.size())));
            }
            if (docs.empty()) return py::list();
        }
        require_open("summarize");
        const auto results = summaries_of(docs, prefix, max_batch_tokens, std::move(progress), call_args("summarize", kw), "summarize");
        py::list out;
        for (std::size_t d = 0; d < docs.size(); ++d) {
            py::list mine;
            const doc_result& dr = results[d];
            for (std::size_t k = 0; k < dr.seqs.size(); ++k) {
                const auto& s = dr.seqs[k];
                std::string text = decode(s);
                if (details) {
                    summary sm;
                    sm.text = std::move(text);
                    sm.ids = s;
                    if (k < dr.scores.size()) sm.score = dr.scores[k];
                    sm.input_tokens = dr.input_tokens;
                    sm.steps = dr.steps;
                    sm.encode_seconds = dr.t.encode_s;
                    sm.decode_seconds = dr.t.decode_s;
                    mine.append(py::cast(std::move(sm)));
                } else {
                    mine.append(py::str(text));
                }
            }
            out.append(dr.seqs.size() == 1 ? mine[0] : py::object(mine));
        }
        return one ? py::object(out[0]) : py::object(out);
    }

    // Model.evaluate: summarizes a data set (a JSON-lines file as `locost eval --data` reads, or a
    // list of (document, reference) pairs or of dicts with "document" and "summary") and scores
    // the summaries with ROUGE (cli::eval_report): the same figures as the tool's --scores JSON,
    // plus "summaries", the generated texts in the data's order.
    py::dict evaluate(const py::object& data, const py::object& prefix, index_t max_batch_tokens, py::object progress,
                      const py::kwargs& kw) {
        std::vector<std::string> docs, refs;
        const bool path_like = py::isinstance<py::str>(data) || py::hasattr(data, "__fspath__");
        if (path_like) {
            const py::object p = py::isinstance<py::str>(data) ? data : py::module_::import("os").attr("fspath")(data);
            for (const auto& item : cli::read_eval_data(utf8_of(p, "evaluate: argument 'data'", /*path=*/true))) {
                docs.push_back(item.text ? *item.text : cli::read_text_input(item.path, "evaluate: data"));
                refs.push_back(item.reference);
            }
        } else if (py::isinstance<py::sequence>(data)) {
            for (const auto& item : py::reinterpret_borrow<py::sequence>(data)) {
                const std::string at = "evaluate: data item " + std::to_string(docs.size());
                if (py::isinstance<py::dict>(item)) {
                    const auto d = py::reinterpret_borrow<py::dict>(item);
                    if (!d.contains("document") || !d.contains("summary"))
                        throw error("python.bad_argument", at + " is a dict without \"document\" and \"summary\"");
                    docs.push_back(utf8_of(d["document"], at + "['document']"));
                    refs.push_back(utf8_of(d["summary"], at + "['summary']"));
                } else if ((py::isinstance<py::tuple>(item) || py::isinstance<py::list>(item)) && py::len(item) == 2) {
                    const auto pair = py::reinterpret_borrow<py::sequence>(item);
                    docs.push_back(utf8_of(pair[0], at + "[0] (the document)"));
                    refs.push_back(utf8_of(pair[1], at + "[1] (the reference)"));
                } else {
                    throw error("python.bad_argument",
                                at + " expects a (document, reference) pair or a dict with \"document\" and \"summary\", got " +
                                    repr_of(item));
                }
            }
        } else {
            throw error("python.bad_argument",
                        "evaluate: argument 'data' expects a JSON-lines file's path or a list of (document, reference) pairs, got " +
                            repr_of(data));
        }
        if (docs.empty()) throw error("python.bad_argument", "evaluate: argument 'data' holds no documents");
        require_open("evaluate");
        const cli::args a = call_args("evaluate", kw, /*with_eval=*/true);
        cli::eval_settings s;
        s.use_stemmer = a.get("rouge-stemmer", "porter") == "porter";
        s.bootstrap_samples = a.integer<int>("bootstrap-samples", 1000, 1, 1000000);
        const auto results = summaries_of(docs, prefix, max_batch_tokens, std::move(progress), a, "evaluate");
        std::vector<cli::eval_row> rows;
        py::list texts;
        for (std::size_t d = 0; d < docs.size(); ++d) {
            cli::eval_row r;
            r.id = std::to_string(d);
            r.reference = refs[d];
            r.summary = decode(results[d].seqs.front());
            r.input_tokens = static_cast<double>(results[d].input_tokens);
            r.new_tokens = static_cast<double>(results[d].steps);
            r.encode_s = results[d].encode_share_s;
            r.decode_s = results[d].decode_share_s;
            r.peak_rss_bytes = static_cast<double>(cli::peak_rss_bytes());
            texts.append(py::str(r.summary));
            rows.push_back(std::move(r));
        }
        py::dict out = py::module_::import("json").attr("loads")(cli::eval_report(rows, 0, s).dump());
        out["summaries"] = texts;
        return out;
    }

    // The summaries of `docs` (generation options `a`, read as summarize reads them): one batch of
    // every text, or (max_batch_tokens > 0) batches by length of at most that many padded tokens
    // (generation::length_batches); each text's result is its own run's.
    std::vector<doc_result> summaries_of(const std::vector<std::string>& docs, const py::object& prefix, index_t max_batch_tokens,
                                         py::object progress, const cli::args& a, const std::string& command) {
        auto defaults = cli::read_generation_defaults(a, *ck_, command, "summarization");
        auto go = cli::read_generation_options(a, command, *cfg_, defaults.config);
        draw_seed_unless_given(a, go);
        if (max_batch_tokens < 0)
            throw error("python.bad_argument", command + ": max_batch_tokens must be 0 or more, got " + std::to_string(max_batch_tokens));
        const auto rows = text_rows(docs, prefix, defaults.prefix, command);
        hint_at_quadratic_time(rows.ids, command);
        python_callbacks cb(std::move(progress));
        // One batch of every text, or (max_batch_tokens > 0) batches by length of at most that
        // many padded tokens (generation::length_batches); each text's result is its own run's.
        std::vector<index_t> lengths;
        for (const auto& r : rows.ids) lengths.push_back(static_cast<index_t>(r.size()));
        std::vector<std::vector<std::size_t>> groups;
        if (max_batch_tokens > 0) groups = generation::length_batches(lengths, max_batch_tokens);
        else {
            groups.emplace_back(docs.size());
            std::iota(groups.back().begin(), groups.back().end(), std::size_t{0});
        }
        std::vector<doc_result> results(docs.size());
        {
            computing nogil;
            const auto lock = lock_model(command);
            if (sled_) model_->set_prefix_length(rows.prefix);  // a plain model reads the question as the rows' first ids
            threads_here();
            for (const auto& g : groups) {
                std::vector<std::vector<std::int64_t>> batch_rows;
                for (std::size_t d : g) batch_rows.push_back(rows.ids[d]);
                auto in = cli::make_batch(std::move(batch_rows), config().pad_token_id);
                in.encode_each = true;  // each text's summary is that of its own run
                auto request = cli::batch_request(in);
                cli::add_generation(request, a, go, defaults.source);
                check_budget(request, command);
                timings t;
                const auto res = run(in, go, cb, t, {});
                const std::size_t per = res.sequences.size() / g.size();
                index_t batch_tokens = 0;
                for (std::size_t d : g) batch_tokens += static_cast<index_t>(rows.ids[d].size());
                for (std::size_t k = 0; k < g.size(); ++k) {
                    auto& mine = results[g[k]];
                    for (std::size_t j = 0; j < per; ++j) {
                        mine.seqs.push_back(res.sequences[k * per + j]);
                        if (k * per + j < res.scores.size()) mine.scores.push_back(res.scores[k * per + j]);
                    }
                    mine.input_tokens = static_cast<index_t>(rows.ids[g[k]].size());
                    mine.steps = res.steps;
                    mine.t = t;
                    mine.encode_share_s =
                        t.encode_s * static_cast<double>(mine.input_tokens) / static_cast<double>(std::max<index_t>(batch_tokens, 1));
                    mine.decode_share_s = t.decode_s / static_cast<double>(g.size());
                }
            }
        }
        generation::token_rows all;
        for (const auto& dr : results) all.insert(all.end(), dr.seqs.begin(), dr.seqs.end());
        warn_once_if_cut(cli::default_length_note(a, command, defaults.default_length(a), go, all));
        return results;
    }

    py::list generate(const py::object& ids, index_t prefix_length, py::object progress, const py::kwargs& kw) {
        require_open("generate");
        const cli::args a = call_args("generate", kw);
        auto defaults = cli::read_generation_defaults(a, *ck_, "generate");
        auto go = cli::read_generation_options(a, "generate", *cfg_, defaults.config);
        draw_seed_unless_given(a, go);
        auto rows = id_rows(ids, "generate: ids");
        check_ids(rows, "generate: ids");
        hint_at_quadratic_time(rows, "generate");
        python_callbacks cb(std::move(progress));
        timings t;
        const auto res = with_batch(
            std::move(rows), "generate", prefix_length,
            [&](models::memory_request& r, const cli::batch_input&) { cli::add_generation(r, a, go, defaults.source); },
            [&](const cli::batch_input& in) { return run(in, go, cb, t, {}); });
        return py::cast(res.sequences);
    }

    py::array_t<float> encode(const py::object& ids, index_t prefix_length, py::object progress) {
        auto rows = id_rows(ids, "encode: ids");
        check_ids(rows, "encode: ids");
        python_callbacks cb(std::move(progress));
        auto states = with_batch(
            std::move(rows), "encode", prefix_length, [](models::memory_request&, const cli::batch_input&) {},
            [&](const cli::batch_input& in) {
                auto out = model_->encoder_states(in.ids.data(), mask_of(in), in.B, in.L, cb.encode_callback());
                cb.finish();
                return out;
            });
        return to_numpy(std::move(states));
    }

    // Teacher-forced logits (batch, T, vocab) of decoder inputs given as they are.
    py::array_t<float> logits(const py::object& ids, const py::object& decoder_ids, index_t prefix_length, py::object progress) {
        auto rows = id_rows(ids, "logits: ids");
        check_ids(rows, "logits: ids");
        auto dec = id_rows(decoder_ids, "logits: decoder_ids");
        check_ids(dec, "logits: decoder_ids");
        if (dec.size() != rows.size())
            throw error("cli.bad_value",
                        "logits: decoder_ids has " + std::to_string(dec.size()) + " rows for " + std::to_string(rows.size()) +
                            " rows of ids");
        const index_t T = dec.empty() ? 0 : static_cast<index_t>(dec[0].size());
        std::vector<std::int64_t> flat;
        for (std::size_t r = 0; r < dec.size(); ++r) {
            if (static_cast<index_t>(dec[r].size()) != T)
                throw error("cli.bad_value",
                            "logits: decoder_ids row " + std::to_string(r) + " has " + std::to_string(dec[r].size()) + " ids, row 0 has " +
                                std::to_string(T) + " (rows must have equal lengths)");
            flat.insert(flat.end(), dec[r].begin(), dec[r].end());
        }
        python_callbacks cb(std::move(progress));
        auto logits = with_batch(
            std::move(rows), "logits", prefix_length,
            [&](models::memory_request& r, const cli::batch_input&) {
                r.decoder = r.teacher_forcing = true;
                r.decoder_positions = T;
            },
            [&](const cli::batch_input& in) {
                auto out = model_->score(in.ids.data(), mask_of(in), in.B, in.L, flat.data(), T, cb.encode_callback());
                cb.finish();
                return out;
            });
        return to_numpy(std::move(logits));
    }

    // Log-probabilities of given targets, as CTranslate2's score_batch: row b's decoder reads the
    // start token then labels[b] but its last, and the result is log p(labels[b][t] | labels[b][<t],
    // ids[b]) for each t: one float32 array per row (rows may differ in length).
    py::list score(const py::object& ids, const py::object& labels, index_t prefix_length, py::object progress) {
        auto targets = id_rows(labels, "score: labels");
        check_ids(targets, "score: labels");
        index_t T = 0;
        for (std::size_t r = 0; r < targets.size(); ++r) {
            if (targets[r].empty()) throw error("python.bad_argument", "score: labels row " + std::to_string(r) + " is empty");
            T = std::max<index_t>(T, static_cast<index_t>(targets[r].size()));
        }
        const cli::args none = call_args("score", py::kwargs());
        const auto defaults = cli::read_generation_defaults(none, *ck_, "score");
        const auto go = cli::read_generation_options(none, "score", *cfg_, defaults.config);
        // (Causal: what follows a shorter row's end, padding here, changes none of its positions.)
        py::list decoder_rows;
        for (const auto& t : targets) {
            py::list row;
            row.append(go.start_token());
            for (index_t i = 0; i + 1 < T; ++i)
                row.append(i + 1 < static_cast<index_t>(t.size()) ? t[static_cast<std::size_t>(i)] : go.pad_token());
            decoder_rows.append(row);
        }
        const auto all = logits(ids, decoder_rows, prefix_length, std::move(progress));
        const auto l = all.unchecked<3>();
        const index_t V = static_cast<index_t>(l.shape(2));
        py::list out;
        for (std::size_t r = 0; r < targets.size(); ++r) {
            py::array_t<float> lp(static_cast<py::ssize_t>(targets[r].size()));
            auto w = lp.mutable_unchecked<1>();
            for (std::size_t t = 0; t < targets[r].size(); ++t) {
                const float* row = l.data(static_cast<py::ssize_t>(r), static_cast<py::ssize_t>(t), 0);
                w(static_cast<py::ssize_t>(t)) = row[targets[r][t]] - generation::detail::log_sum_exp(row, V);
            }
            out.append(lp);
        }
        return out;
    }

    // The memory estimate of a request, per phase (what --dry-run prints).
    py::dict estimate(const py::object& input, py::object length, py::object batch_arg, const py::kwargs& kw) {
        require_open("estimate");
        const cli::args a = call_args("estimate", kw);
        auto defaults = cli::read_generation_defaults(a, *ck_, "estimate");
        const auto go = cli::read_generation_options(a, "estimate", *cfg_, defaults.config);
        models::memory_request request;
        if (!input.is_none()) {
            std::vector<std::vector<std::int64_t>> rows;
            if (py::isinstance<py::str>(input) ||
                (py::isinstance<py::sequence>(input) && !is_numpy_array(input) && py::len(input) > 0 &&
                 py::isinstance<py::str>(input[py::int_(0)]))) {
                std::vector<std::string> docs;
                if (py::isinstance<py::str>(input)) docs.push_back(utf8_of(input, "estimate: the text"));
                else
                    for (const auto& t : py::reinterpret_borrow<py::sequence>(input))
                        docs.push_back(utf8_of(t, "estimate: text " + std::to_string(docs.size())));
                rows = text_rows(docs, py::none(), defaults.prefix, "estimate").ids;
            } else {
                rows = id_rows(input, "estimate: input");
                (void)cut_rows(rows, 0, "estimate: input");
            }
            request = cli::batch_request(cli::make_batch(rows, config().pad_token_id, "estimate: input"));
        } else {
            // A shape alone: estimated without making the input (length=3e11 asks for numbers, not
            // for the 2.4 TB a batch of that many ids would take).
            if (length.is_none()) throw error("python.bad_argument", "estimate: give the input (a text, texts or ids) or length=N");
            constexpr index_t most = index_t{1} << 40;
            // An int, or a float with an integer value (length=3e8), in [1, 2^40].
            auto whole = [&](const py::object& v, const char* name) {
                auto refuse = [&] {
                    throw error("python.bad_argument",
                                std::string("estimate: argument '") + name + "' expects an integer in [1, " + std::to_string(most) +
                                    "], got " + py::repr(v).cast<std::string>());
                };
                if (py::isinstance<py::bool_>(v)) refuse();
                if (py::isinstance<py::float_>(v)) {
                    const double x = v.cast<double>();
                    if (!(x >= 1 && x <= static_cast<double>(most)) || x != std::floor(x)) refuse();
                    return static_cast<index_t>(x);
                }
                if (!py::isinstance<py::int_>(v)) refuse();
                const auto big = v.cast<py::int_>();
                if (big < py::int_(1) || big > py::int_(most)) refuse();
                return big.cast<index_t>();
            };
            const index_t L = whole(length, "length"), B = whole(batch_arg, "batch");
            request.batch = B;
            request.length = L;
            request.valid_tokens = B * L <= most ? B * L : most;
            request.length_driver = "the input length (" + std::to_string(L) + " tokens)";
        }
        cli::add_generation(request, a, go, defaults.source);
        request.threads = threads_ > 0 ? threads_ : num_threads();
        request.device = device_;
        const auto est = models::estimate_memory(*cfg_, mo_, request);
        const auto budget = request_budget();
        py::list phases;
        for (const auto& p : est.phases) {
            py::list items;
            for (const auto& i : p.items)
                items.append(py::dict(py::arg("what") = i.what, py::arg("bytes") = i.bytes, py::arg("grows_with") = i.grows_with));
            phases.append(py::dict(py::arg("name") = p.name, py::arg("bytes") = p.bytes(), py::arg("items") = items));
        }
        return py::dict(py::arg("peak_bytes") = est.peak(), py::arg("peak_phase") = est.peak_phase().name, py::arg("phases") = phases,
                        py::arg("budget_bytes") = budget.bytes, py::arg("budget_source") = budget.source,
                        py::arg("fits") = est.peak() <= budget.bytes, py::arg("table") = est.table(), py::arg("batch") = request.batch,
                        py::arg("length") = request.length);
    }

    // Streaming: a worker thread decodes, the iterator hands over each token as it comes.
    class token_stream;
    std::shared_ptr<token_stream> stream(const std::shared_ptr<model>& self, const py::object& text, const py::object& prefix,
                                         const py::kwargs& kw);

    std::vector<int> tokenize(const py::object& text) {
        require_open("tokenize");
        return tokenizer().encode(utf8_of(text, "tokenize: the text"));
    }
    std::string decode(const std::vector<std::int64_t>& ids) {
        require_open("decode");
        std::vector<int> v(ids.begin(), ids.end());
        return tokenizer().decode(v, static_cast<int>(config().vocab_size));
    }

    // The generation options summarize would use (defaults from the checkpoint, its summarization
    // task's settings, then the arguments), as Python values: None where unset.
    py::dict generation_settings(const py::kwargs& kw) {
        const cli::args a = call_args("generation_settings", kw);
        auto defaults = cli::read_generation_defaults(a, *ck_, "generation_settings", "summarization");
        const auto go = cli::read_generation_options(a, "generation_settings", *cfg_, defaults.config);
        py::dict out;
        for (const auto& s : cli::generation_settings(a, go, defaults.source, defaults.given, defaults.from_task))
            out[py::str(s.name)] = setting_value(s.name, s.value);
        return out;
    }

    // Frees the model's weights and working memory now (and gives the freed memory back to the
    // system), after stopping its open token streams; later calls raise python.closed. Waiting
    // for a call in progress on another thread honours Ctrl-C. Closing twice does nothing.
    void close();
    ~model() {
        model_.reset();
        tok_.reset();
        ::malloc_trim(0);  // glibc keeps freed pages of its arenas otherwise
    }

    friend class token_stream;

private:
    void require_open(const std::string& command) const {
        if (!model_)
            throw error("python.closed", command + ": the Model was closed (close(), or the end of its with block); load it again");
    }

    // The model's lock, taken without the GIL. The wait honours Ctrl-C (checked every `period`),
    // or `waiting` (a stream's worker: its cancellation); a closed model refuses.
    template <class Waiting>
    std::unique_lock<std::timed_mutex> lock_model(const std::string& command, Waiting&& waiting) {
        std::unique_lock<std::timed_mutex> l(mu_, std::defer_lock);
        while (!l.try_lock_for(python_callbacks::period)) waiting();
        require_open(command);
        return l;
    }
    std::unique_lock<std::timed_mutex> lock_model(const std::string& command) { return lock_model(command, check_python_signals); }
    static void check_python_signals() {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }

    // summarize's note that a summary stopped at transformers' bare default length, as a
    // UserWarning once per model (with the GIL).
    void warn_once_if_cut(const std::string& note) {
        if (note.empty() || cut_said_.exchange(true)) return;
        if (PyErr_WarnEx(PyExc_UserWarning, note.c_str(), 2) != 0) throw py::error_already_set();
    }

    // A whole book given to an encoder that attends all-to-all would compute for hours without a
    // word: a UserWarning with the work it means, and what reads it in linear time.
    void hint_at_quadratic_time(const std::vector<std::vector<std::int64_t>>& rows, const std::string& command) const {
        constexpr index_t from = 16384;
        index_t L = 0;
        for (const auto& r : rows) L = std::max<index_t>(L, static_cast<index_t>(r.size()));
        if (sled_ || !model_->family().all_to_all_encoder || L < from) return;
        const auto& c = config();
        const double flops = 4.0 * static_cast<double>(L) * static_cast<double>(L) * static_cast<double>(c.d_model) *
            static_cast<double>(c.num_layers) * static_cast<double>(rows.size());
        const int threads = threads_ > 0 ? threads_ : num_threads();
        const double hours = flops / (50e9 * threads) / 3600.0;  // 50 GFLOP/s per thread: an AVX2 core's sustained rate
        char text[512];
        std::snprintf(text, sizeof text,
                      "%s: %s's encoder attends from every token to every other: %lld tokens are about %.1e floating-point "
                      "operations in its attention alone, %.1f hours at 50 GFLOP/s on each of %d threads (the progress bar "
                      "shows the time left). SLED reads a long text in overlapping chunks, in time linear in its length: "
                      "locost.Model(path, sled=dict(context=512))",
                      command.c_str(), model_->family().name, static_cast<long long>(L), flops, hours, threads);
        if (PyErr_WarnEx(PyExc_UserWarning, text, 2) != 0) throw py::error_already_set();
    }

    // A generation setting as Python reads it: None where unset, numbers, booleans, id lists.
    static py::object setting_value(const std::string& name, const std::string& v) {
        if (v == "unset" || v == "none") return py::none();
        if (v == "true" || v == "false") return py::bool_(v == "true");
        const options::record* r = options::find(name);
        try {
            switch (r ? r->type : options::value_type::text) {
            case options::value_type::integer: return py::int_(std::stoll(v));
            case options::value_type::real: return py::float_(std::stod(v));
            case options::value_type::id_or_ids:
            case options::value_type::id_list: {
                py::list ids;
                std::size_t at = 0;
                while (at <= v.size()) {
                    const auto comma = std::min(v.find(',', at), v.size());
                    ids.append(py::int_(std::stoll(v.substr(at, comma - at))));
                    at = comma + 1;
                }
                if (r->type == options::value_type::id_or_ids && py::len(ids) == 1) return ids[0];
                return ids;
            }
            case options::value_type::id_lists: return py::module_::import("json").attr("loads")(v);
            default: return py::str(v);
            }
        } catch (const std::exception&) {
            return py::str(v);  // a form this reader does not know: as the tool shows it
        }
    }

    struct text_batch {
        std::vector<std::vector<std::int64_t>> ids;
        index_t prefix = 0;  // ids of the question before every document
    };

    cli::args call_args(const std::string& command, const py::kwargs& kw, bool with_eval = false) const {
        std::vector<std::pair<std::string, py::object>> values;
        for (const auto& [k, v] : kw)
            values.emplace_back(utf8_of(py::str(k), command + ": an argument's name"), py::reinterpret_borrow<py::object>(v));
        if (!with_eval) return given_of(command, values, generation_records());
        static const auto records = [] {
            auto r = generation_records();
            for (const auto* e : options::records_of({options::group::eval})) r.push_back(e);
            return r;
        }();
        return given_of(command, values, records);
    }

    // Each text tokenized as the tool does (the checkpoint's text prefix first; the question's
    // ids before every document). SLED is told the question's length.
    text_batch text_rows(const std::vector<std::string>& docs, const py::object& prefix, const std::string& text_prefix,
                         const std::string& command) {
        text_batch out;
        const index_t V = config().vocab_size;
        const auto budget = host_budget();
        std::vector<std::int64_t> q;
        if (!prefix.is_none())
            q = cli::text_ids(utf8_of(prefix, command + ": argument 'prefix'"), V, tokenizer(), budget, command + ": prefix");
        for (std::size_t d = 0; d < docs.size(); ++d) {
            const std::string name = command + ": text " + std::to_string(d);
            const std::string text = text_prefix + docs[d];
            cli::check_document_text(text, name);
            auto ids = cli::text_ids(text, V, tokenizer(), budget, name);
            ids.insert(ids.begin(), q.begin(), q.end());
            out.ids.push_back(std::move(ids));
        }
        out.prefix = static_cast<index_t>(q.size());
        (void)cut_rows(out.ids, out.prefix, command);
        return out;
    }

    // What every ids call does without the GIL and under the model's lock: the rows padded into a
    // batch, the request estimated (adjust adds the call's decoding) and refused over the budget,
    // SLED told the prefix, the calling thread's pool set; then work(batch).
    template <class Adjust, class Work>
    std::invoke_result_t<Work&, const cli::batch_input&> with_batch(std::vector<std::vector<std::int64_t>> rows, const std::string& command,
                                                                    index_t prefix_length, Adjust adjust, Work work) {
        (void)cut_rows(rows, prefix_length, command + ": ids");
        computing nogil;
        const auto lock = lock_model(command);
        const auto in = cli::make_batch(std::move(rows), config().pad_token_id, command + ": ids");
        auto request = cli::batch_request(in);
        adjust(request, in);
        check_budget(request, command);
        set_prefix(prefix_length);
        threads_here();
        return work(in);
    }

    // max_input_tokens= (given to Model): each row cut to its first N ids, its closing eos kept
    // (cli::cut_rows); returns the lengths before the cut.
    std::vector<index_t> cut_rows(std::vector<std::vector<std::int64_t>>& rows, index_t prefix, const std::string& what) const {
        return cli::cut_rows(*base_, rows, config(), prefix, what);
    }

    void check_ids(const std::vector<std::vector<std::int64_t>>& rows, const std::string& what) const {
        if (rows.empty()) throw error("encode.empty_input", what + ": no rows of ids");
        io::check_ids_vocab(io::id_batch{rows, rows.size() > 1}, config().vocab_size, what);
    }

    void set_prefix(index_t n) {
        if (sled_) model_->set_prefix_length(n);
        else if (n != 0)
            throw error("sled.bad_prefix",
                        "prefix_length=" + std::to_string(n) +
                            " applies to SLED (load the model with sled=dict(context=...)); "
                            "without SLED a prefix is just the first ids of each row");
    }

    // What a request is checked against: memory_budget= when given, else the memory available now
    // on the model's device (device='cuda': the GPU's free memory) plus what the loaded model
    // already holds there.
    runtime::memory_budget request_budget() const {
        if (budget_) return *budget_;
        auto b = device_available();
        if (b.bytes < 1e18) {
            b.bytes += resident_;
            b.source += ", plus the loaded model's " + models::format_bytes(resident_);
        }
        return b;
    }
    runtime::memory_budget device_available() const {
        if (device_ == device_kind::cpu) return models::available_memory();
        const auto g = cli::cuda_devices().front();
        return {static_cast<double>(g.free_bytes), "free memory of cuda:" + std::to_string(g.index)};
    }
    // Tokenizing happens in host memory whatever the device.
    runtime::memory_budget host_budget() const { return device_ == device_kind::cpu ? request_budget() : models::available_memory(); }
    void check_budget(models::memory_request r, const std::string& command) const {
        r.threads = threads_ > 0 ? threads_ : num_threads();
        r.device = device_;
        const auto est = models::estimate_memory(*cfg_, mo_, r);
        models::check_memory_budget(est, model_ ? request_budget() : (budget_ ? *budget_ : device_available()), command);
    }

    // The calling thread's OpenMP pool size (a Python thread has its own) and denormal flushing.
    // Called under a signal_shield: the pool at this call's size has the signals blocked too,
    // including threads some other code on this thread created before any shield.
    void threads_here() const {
        set_num_threads(threads_);
        cli::flush_denormals_unless_kept();
        const sigset_t async = asynchronous_signals();
#pragma omp parallel
        pthread_sigmask(SIG_BLOCK, &async, nullptr);
    }

    // Encode and decode one batch, without the GIL; `on_token` sees each step's tokens.
    generation::generation_result run(const cli::batch_input& in, const generation::generation_options& go, python_callbacks& cb,
                                      timings& t, const std::function<bool(const generation::step_event&)>& on_token) {
        const auto t0 = clock::now();
        const index_t total = go.total_length() - 1;
        auto res = model_->generate(
            in, mask_of(in), go, cb.encode_callback(),
            [&](const generation::step_event& e) {
                cb.poll("decoding", static_cast<double>(e.step + 1), static_cast<double>(total));
                return on_token ? on_token(e) : true;
            },
            t.encode_s);
        t.decode_s = std::chrono::duration<double>(clock::now() - t0).count() - t.encode_s;
        cb.finish();
        return res;
    }

    std::unique_ptr<options::given> base_;  // the Model's own options (what to load, where, how)
    std::unique_ptr<io::checkpoint> ck_;
    models::model_options mo_;
    std::shared_ptr<const models::any_config> cfg_;
    std::unique_ptr<device_model> model_;
    device_kind device_ = device_kind::cpu;
    std::optional<text::tokenizer> tok_;
    std::optional<runtime::memory_budget> budget_;
    double resident_ = 0;
    int threads_ = 0;
    bool sled_ = false;
    std::atomic<bool> cut_said_{false};                 // warn_once_if_cut
    std::timed_mutex mu_;                               // one call at a time (lock_model)
    std::mutex streams_mu_;                             // guards streams_
    std::vector<std::weak_ptr<token_stream>> streams_;  // the open ones, for close()
};

// The iterator generate_tokens returns. The worker owns nothing Python: it pushes token ids into
// a queue under a mutex; __next__ waits (without the GIL, checking for Ctrl-C) and turns them into
// token_event objects. Closing it (close(), leaving a for loop early, garbage collection) asks the
// worker to stop at its next step and waits for it.

}  // namespace locost::python
