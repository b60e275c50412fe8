// generate_tokens: a worker thread decodes, the iterator hands over each token as it comes.
#pragma once
#include "model.hpp"

namespace locost::python {

// The iterator generate_tokens returns. A worker thread decodes and pushes token ids into a queue;
// __next__ waits for one (without the GIL, checking for Ctrl-C) and turns it into a token_event.
// The worker decodes only as the tokens are read: once it is `ahead` tokens ahead of the reader
// it waits, and while it waits the model is free for other calls (the decoding state is the
// worker's own; a call between two steps changes nothing of it). Closing the stream (close(),
// leaving a for loop early, garbage collection, the model's close()) stops the worker at its
// next step and waits for it.
class model::token_stream {
public:
    token_stream(model& m, std::shared_ptr<model> owner, cli::batch_input in, generation::generation_options go, index_t prefix,
                 bool decodes)
        : prefix_(prefix), decodes_(decodes), m_(m), owner_(std::move(owner)), in_(std::move(in)), go_(std::move(go)) {
        go_.token_logprobs = true;
        worker_ = std::thread([this] { work(); });
    }
    ~token_stream() {
        // Waiting for the worker's current step needs no Python: other threads run meanwhile.
        if (PyGILState_Check()) {
            py::gil_scoped_release nogil;
            stop();
        } else {
            stop();
        }
    }

    token_event next() {
        if (closed_) throw py::stop_iteration();  // a closed stream yields nothing more, decoded or not
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(q_);
                if (!tokens_.empty()) break;
                if (done_) {
                    if (failure_) {
                        auto f = failure_;
                        failure_ = nullptr;
                        join();
                        std::rethrow_exception(f);
                    }
                    join();
                    throw py::stop_iteration();
                }
            }
            {
                py::gil_scoped_release nogil;
                std::unique_lock<std::mutex> lock(q_);
                produced_.wait_for(lock, python_callbacks::period, [&] { return !tokens_.empty() || done_; });
            }
            if (PyErr_CheckSignals() != 0) {
                {
                    py::gil_scoped_release nogil;
                    stop();
                }
                throw py::error_already_set();  // (with the GIL: it takes Python's error)
            }
        }
        queued q;
        bool last;
        {
            std::unique_lock<std::mutex> lock(q_);
            q = tokens_.front();
            tokens_.pop_front();
            last = done_ && tokens_.empty() && !failure_;
        }
        consumed_.notify_all();
        ids_.push_back(q.id);
        token_event e;
        e.id = q.id;
        e.logprob = q.logprob;
        e.step = static_cast<index_t>(ids_.size()) - 1;
        e.is_last = last || go_.is_eos(q.id) || e.step + 1 >= go_.total_length() - 1;
        // The text this token adds: the decoded whole minus what was handed out already, held
        // back while it ends inside a character.
        const std::string whole = decodes_ ? m_.decode(ids_) : std::string();
        if (whole.compare(0, emitted_.size(), emitted_) == 0 &&
            !(whole.size() >= 3 && whole.compare(whole.size() - 3, 3, "\xEF\xBF\xBD") == 0 && !e.is_last)) {
            e.text = whole.substr(emitted_.size());
            emitted_ = whole;
        }
        return e;
    }

    void close() {
        closed_ = true;
        py::gil_scoped_release nogil;
        stop();
    }

    // (Without the GIL.) Asks the worker to stop at its next step and waits for it.
    void stop() {
        {
            std::lock_guard<std::mutex> q(q_);
            cancel_ = true;
        }
        consumed_.notify_all();
        join();
    }

    // (With the GIL.) The model was closed: nothing more to read.
    void closed_by_model() { closed_ = true; }

    static constexpr std::size_t ahead = 1;  // tokens decoded before the reader asks for them

private:
    struct queued {
        std::int64_t id = 0;
        float logprob = 0;
    };

    void work() {
        signal_shield shield;  // this thread and its pool compute: signals go to Python's threads
        const auto cancelled_here = [this] {
            if (cancel_) throw cancelled();
        };
        const interrupt_check stop_here(cancelled_here);
        try {
            auto lock = m_.lock_model("generate_tokens", cancelled_here);
            m_.threads_here();
            if (m_.sled_) m_.model_->set_prefix_length(prefix_);
            double encode_s = 0;
            m_.model_->generate(
                in_, mask_of(in_), go_, [&](const models::encode_progress&) { cancelled_here(); },
                [&](const generation::step_event& e) {
                    std::unique_lock<std::mutex> q(q_);
                    tokens_.push_back({(*e.tokens)[0], e.logprobs ? (*e.logprobs)[0] : 0.0f});
                    produced_.notify_all();
                    if (tokens_.size() >= ahead && !cancel_) {
                        // Ahead of the reader: the model is free for other calls until it reads.
                        lock.unlock();
                        consumed_.wait(q, [&] { return tokens_.size() < ahead || cancel_; });
                        q.unlock();
                        if (cancel_) return false;
                        // (This thread's pool size and signal mask persist; the prefix length is
                        // the encoder's, which is done: nothing to set again per token.)
                        lock = m_.lock_model("generate_tokens", cancelled_here);
                    }
                    return !cancel_;
                },
                encode_s);
        } catch (const cancelled&) {
        } catch (...) {
            std::lock_guard<std::mutex> q(q_);
            failure_ = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> q(q_);
            done_ = true;
        }
        produced_.notify_all();
    }
    struct cancelled {};

    void join() {
        std::lock_guard<std::mutex> j(join_mu_);  // (close() and a reader's Ctrl-C may both wait)
        if (worker_.joinable()) worker_.join();
    }

    index_t prefix_ = 0;
    bool decodes_ = true;  // the tokens' text: a text input, or ids with a tokenizer at hand
    model& m_;
    std::shared_ptr<model> owner_;  // keeps the model alive while the worker runs
    cli::batch_input in_;
    generation::generation_options go_;
    std::thread worker_;
    std::mutex q_, join_mu_;
    std::condition_variable produced_, consumed_;
    std::deque<queued> tokens_;
    bool done_ = false;
    std::exception_ptr failure_;
    std::atomic<bool> cancel_{false};
    bool closed_ = false;  // (touched with the GIL held)
    std::vector<std::int64_t> ids_;
    std::string emitted_;
};

inline void model::close() {
    std::vector<std::shared_ptr<token_stream>> open;
    {
        std::lock_guard<std::mutex> l(streams_mu_);
        for (auto& w : streams_)
            if (auto s = w.lock()) {
                s->closed_by_model();
                open.push_back(std::move(s));
            }
        streams_.clear();
    }
    {
        py::gil_scoped_release nogil;
        // The streams first: a stream's worker holds the model's decoding state between its steps.
        for (auto& s : open) s->stop();
        std::unique_lock<std::timed_mutex> l(mu_, std::defer_lock);
        while (!l.try_lock_for(python_callbacks::period)) check_python_signals();
        model_.reset();
        tok_.reset();
        ::malloc_trim(0);  // glibc keeps freed pages of its arenas otherwise
    }
    // (`open`'s last references may be the only ones left: dropped here, with the GIL.)
}

std::shared_ptr<model::token_stream> model::stream(const std::shared_ptr<model>& self, const py::object& input, const py::object& prefix,
                                                   const py::kwargs& kw) {
    const cli::args a = call_args("generate_tokens", kw);
    require_open("generate_tokens");
    auto defaults = cli::read_generation_defaults(a, *ck_, "generate_tokens", "summarization");
    auto go = cli::read_generation_options(a, "generate_tokens", *cfg_, defaults.config);
    draw_seed_unless_given(a, go);
    if (go.num_beams != 1)
        throw error("generate.invalid_option",
                    "generation option 'num_beams' is " + std::to_string(go.num_beams) +
                        ", expected 1 for generate_tokens (it streams one sequence; beam search's best sequence "
                        "is known only at the end: use summarize)");
    if (go.do_sample && go.num_return_sequences != 1)
        throw error("generate.invalid_option",
                    "generation option 'num_return_sequences' is " + std::to_string(go.num_return_sequences) +
                        ", expected 1 for generate_tokens (it streams one sequence)");
    text_batch rows;
    bool decodes = true;
    if (py::isinstance<py::str>(input)) {
        rows = text_rows({utf8_of(input, "generate_tokens: the text")}, prefix, defaults.prefix, "generate_tokens");
        hint_at_quadratic_time(rows.ids, "generate_tokens");
    } else {
        // One row of ids (a list or a 1-D array): the tokens' text when the checkpoint has a tokenizer.
        if (!py::isinstance<py::sequence>(input) && !is_numpy_array(input))
            throw error("python.bad_argument",
                        "generate_tokens: expects a text (str) or one row of ids, got " + py::repr(input).cast<std::string>());
        py::list one;
        one.append(input);
        rows.ids = id_rows(one, "generate_tokens: ids");
        (void)cut_rows(rows.ids, 0, "generate_tokens: ids");
        check_ids(rows.ids, "generate_tokens: ids");
        if (!prefix.is_none())
            throw error("python.bad_argument",
                        "generate_tokens: prefix (a text) goes with a text input; with ids, put the question's ids first");
        try {
            tokenizer();
        } catch (const error&) { decodes = false; }
    }
    auto in = cli::make_batch(rows.ids, config().pad_token_id, "generate_tokens: ids");
    auto request = cli::batch_request(in);
    cli::add_generation(request, a, go, defaults.source);
    check_budget(request, "generate_tokens");
    auto s = std::make_shared<token_stream>(*this, self, std::move(in), go, rows.prefix, decodes);
    std::lock_guard<std::mutex> l(streams_mu_);
    std::erase_if(streams_, [](const std::weak_ptr<token_stream>& w) { return w.expired(); });
    streams_.push_back(s);
    return s;
}

}  // namespace locost::python
