// generate_tokens: a worker thread decodes, the iterator hands over each token as it comes.
#pragma once
#include "model.hpp"

namespace locost::python {

class model::token_stream {
public:
    token_stream(model& m, std::shared_ptr<model> owner, cli::batch_input in, generation::generation_options go, index_t prefix,
                 bool decodes)
        : prefix_(prefix), decodes_(decodes), m_(m), owner_(std::move(owner)), in_(std::move(in)), go_(std::move(go)) {
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
                cv_.wait_for(lock, python_callbacks::period, [&] { return !tokens_.empty() || done_; });
            }
            if (PyErr_CheckSignals() != 0) {
                stop();
                throw py::error_already_set();
            }
        }
        std::int64_t id;
        bool last;
        {
            std::unique_lock<std::mutex> lock(q_);
            id = tokens_.front();
            tokens_.pop_front();
            last = done_ && tokens_.empty() && !failure_;
        }
        ids_.push_back(id);
        token_event e;
        e.id = id;
        e.step = static_cast<index_t>(ids_.size()) - 1;
        e.is_last = last || go_.is_eos(id) || e.step + 1 >= go_.total_length() - 1;
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

private:
    void work() {
        signal_shield shield;  // this thread and its pool compute: signals go to Python's threads
        const interrupt_check stop_here([this] {
            if (cancel_) throw cancelled();
        });
        try {
            std::lock_guard<std::mutex> lock(m_.mu_);
            m_.threads_here();
            if (m_.sled_) m_.model_->set_prefix_length(prefix_);
            double encode_s = 0;
            m_.model_->generate(
                in_, mask_of(in_), go_,
                [&](const models::encode_progress&) {
                    if (cancel_) throw cancelled();
                },
                [&](const generation::step_event& e) {
                    {
                        std::lock_guard<std::mutex> q(q_);
                        tokens_.push_back((*e.tokens)[0]);
                    }
                    cv_.notify_all();
                    return !cancel_.load();
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
        cv_.notify_all();
    }
    struct cancelled {};

    void stop() {
        cancel_ = true;
        join();
    }
    void join() {
        if (worker_.joinable()) worker_.join();
    }

    index_t prefix_ = 0;
    bool decodes_ = true;  // the tokens' text: a text input, or ids with a tokenizer at hand
    model& m_;
    std::shared_ptr<model> owner_;  // keeps the model alive while the worker runs
    cli::batch_input in_;
    generation::generation_options go_;
    std::thread worker_;
    std::mutex q_;
    std::condition_variable cv_;
    std::deque<std::int64_t> tokens_;
    bool done_ = false;
    std::exception_ptr failure_;
    std::atomic<bool> cancel_{false};
    bool closed_ = false;  // (touched with the GIL held)
    std::vector<std::int64_t> ids_;
    std::string emitted_;
};


std::shared_ptr<model::token_stream> model::stream(const std::shared_ptr<model>& self, const py::object& input, const py::object& prefix,
                                                   const py::kwargs& kw) {
    const cli::args a = call_args("generate_tokens", kw);
    auto defaults = cli::read_generation_defaults(a, *ck_, "generate_tokens");
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
    } else {
        // One row of ids (a list or a 1-D array): the tokens' text when the checkpoint has a tokenizer.
        if (!py::isinstance<py::sequence>(input) && !py::isinstance<py::array>(input))
            throw error("python.bad_argument",
                        "generate_tokens: expects a text (str) or one row of ids, got " + py::repr(input).cast<std::string>());
        py::list one;
        one.append(input);
        rows.ids = id_rows(one, "generate_tokens: ids");
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
    return std::make_shared<token_stream>(*this, self, std::move(in), go, rows.prefix, decodes);
}

}  // namespace locost::python
