// locost serve: the work behind the HTTP layer.
//
// A job is one document of a request (a completions request with a list of prompts is one job
// per prompt). Its path:
//
//   admitted   its memory estimate (models::estimate_memory, less the weights the server already
//              holds) is counted against the budget: a job whose estimate alone exceeds the
//              budget is refused (memory.over_budget); one that does not fit beside the jobs in
//              flight waits, in arrival order, in a queue of at most max_queue jobs (server.busy
//              beyond it)
//   encoded    by one of two encoder lanes: documents up to long_tokens in one, longer ones in
//              the other, so that a book does not queue the short documents behind it. Each lane
//              encodes with a model of its own (an encoder keeps its working buffers between its
//              layers, so two encodes never share one); decoding uses the long lane's, whose
//              decoder an encode does not touch. With one model (encoder_lanes 1), one lane.
//   decoded    greedy and sampled jobs in one running batch (generation::running_batch,
//              continuous batching), each with its own settings (those of one length share a
//              batch): a job joins it between two decoding steps as soon as it is encoded, and
//              leaves it when it ends; its memory returns at once. Its result is that of its
//              own run (the running batch's tests). Beam searches decode in a cohort instead:
//              the encoded jobs with the same settings at hand when it starts, as one
//              generation::generate batch (each document's result again its own), finished
//              documents leaving it. A batch holds at most max_batch_tokens of input; a job
//              beyond that waits for room or starts another.
//
// Turns. The encoders and the batches share the cores by taking turns (turn_lock): an encoder
// offers the turn after every tile of every layer (the encoder's progress callback), a batch
// after every decoding step. Short work (the short lane, decoding) goes before the long lane's,
// which still gets a turn once it has waited a second. So a short request's encoding and
// decoding steps run between the tiles of a book's encoder, waiting for one tile at most, and
// batches step in turn; the work itself runs on all the threads each time.
//
// Cancelling: a job's `cancelled` flag (the client went away) is seen at the encoder's next
// tile (the callback throws), at its batch's next step (it leaves a running batch, with its
// memory; a cohort stops reading its rows and stops when every job is cancelled), or when it
// leaves the queue.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <locost/locost.hpp>

namespace locost::serve {

using clock = std::chrono::steady_clock;

// Turns on the cores. Short work (the short documents' encoder, decoding steps) goes before long
// work (a long document's encoder), first come first served within each kind; long work that has
// waited `long_wait` goes next all the same, so a stream of short requests slows a book down but
// never stops it. yield() hands the turn on only to work that would be chosen before its holder.
class turn_lock {
public:
    explicit turn_lock(std::chrono::milliseconds long_wait = std::chrono::milliseconds(1000)) : long_wait_(long_wait) {}

    void acquire(bool long_work) {
        std::unique_lock<std::mutex> l(m_);
        const std::uint64_t mine = next_++;
        waiting_.push_back({mine, long_work, clock::now()});
        // (pick() changes with time as well as with releases: look again every 50 ms.)
        while (held_ || pick() != mine) cv_.wait_for(l, std::chrono::milliseconds(50));
        for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
            if (it->ticket == mine) {
                waiting_.erase(it);
                break;
            }
        held_ = true;
    }
    void release() {
        {
            const std::lock_guard<std::mutex> l(m_);
            held_ = false;
        }
        cv_.notify_all();
    }
    void yield(bool long_work) {
        {
            const std::lock_guard<std::mutex> l(m_);
            if (waiting_.empty()) return;
            const std::uint64_t chosen = pick();
            const auto next = std::find_if(waiting_.begin(), waiting_.end(), [&](const waiter& w) { return w.ticket == chosen; });
            // Short work keeps the turn over long work that has not yet waited long_wait.
            if (next == waiting_.end() || (!long_work && next->long_work && clock::now() - next->since < long_wait_)) return;
        }
        release();
        acquire(long_work);
    }

private:
    struct waiter {
        std::uint64_t ticket;
        bool long_work;
        clock::time_point since;
    };
    // The waiter to go next: the oldest long one if it has waited long_wait, else the oldest short
    // one, else the oldest long one.
    std::uint64_t pick() const {
        const waiter *first_short = nullptr, *first_long = nullptr;
        for (const auto& w : waiting_) {
            if (w.long_work && !first_long) first_long = &w;
            if (!w.long_work && !first_short) first_short = &w;
        }
        if (first_long && (!first_short || clock::now() - first_long->since >= long_wait_)) return first_long->ticket;
        return first_short ? first_short->ticket : ~std::uint64_t{0};
    }

    std::chrono::milliseconds long_wait_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<waiter> waiting_;
    std::uint64_t next_ = 0;
    bool held_ = false;
};

using model_type = models::any_model<float, cpu>;

struct job_failure {
    std::string id, message;
};

// One document of a request, from admission to its sequences.
struct job {
    // What to run (set before submit).
    std::vector<std::int64_t> ids;
    generation::generation_options go;
    std::string batch_key;      // jobs with equal keys decode together
    double bytes = 0;           // reserved against the budget while the job is in flight
    index_t choices = 1;        // sequences it returns
    index_t prefix_length = 0;  // SLED: the question's ids at the start of `ids`

    std::atomic<bool> cancelled{false};

    enum class phase { waiting, encoding, encoded, decoding, done, failed };
    // Everything below is guarded by `m`; `changed` is notified on every update.
    mutable std::mutex m;
    std::condition_variable changed;
    phase ph = phase::waiting;
    double encoded_fraction = 0;
    model_type::encoded enc;
    std::vector<std::vector<std::int64_t>> rows;  // per choice: ids so far (greedy and sampling), start token first
    std::vector<std::vector<std::int64_t>> sequences;
    job_failure failure;
    std::uint64_t version = 0;
    clock::time_point submitted = clock::now(), first_token{};
    double encode_s = 0, decode_s = 0;

    bool finished() const { return ph == phase::done || ph == phase::failed; }
};

// Counters /metrics reports (guarded by the scheduler's mutex unless atomic).
struct scheduler_counters {
    std::atomic<std::uint64_t> documents_in{0}, documents_out{0}, tokens_in{0}, tokens_out{0}, cohorts{0}, cancelled{0};
    std::atomic<std::uint64_t> decode_steps{0}, decode_rows{0};  // model steps, and the rows they ran
    std::atomic<double> encode_seconds{0}, decode_seconds{0};
};

struct scheduler_settings {
    double budget_bytes = 0;   // the whole server's budget
    double weights_bytes = 0;  // held from the start
    std::size_t max_queue = 64;
    index_t max_batch_tokens = 65536;
    index_t long_tokens = 8192;  // documents longer than this take the long lane
    int threads = 0;
    int max_cohorts = 8;
    bool sled = false;
};

class scheduler {
public:
    // `short_model`: the short lane's own copy of the model (nullptr: one lane, on `model`).
    scheduler(model_type& model, model_type* short_model, scheduler_settings s) : model_(model), short_model_(short_model), s_(s) {
        for (int lane = 0; lane < (short_model_ ? 2 : 1); ++lane) lanes_.emplace_back([this, lane] { encode_lane(lane); });
        dispatcher_ = std::thread([this] { dispatch(); });
    }
    ~scheduler() { stop(); }

    // Admits a job or throws: memory.over_budget (its estimate alone is over the budget),
    // server.busy (the queue is full), server.shutting_down.
    void submit(const std::shared_ptr<job>& j) {
        {
            const std::lock_guard<std::mutex> l(m_);
            if (stopping_) throw error("server.shutting_down", "the server is shutting down and takes no new requests");
            if (s_.weights_bytes + j->bytes > s_.budget_bytes)
                throw error("memory.over_budget",
                            "the document needs an estimated " + models::format_bytes(j->bytes) + " beside the model's " +
                                models::format_bytes(s_.weights_bytes) + ", more than the server's memory budget of " +
                                models::format_bytes(s_.budget_bytes) + " (--memory-budget); send a shorter document or fewer choices");
            if (waiting_.size() >= s_.max_queue)
                throw error("server.busy",
                            "the queue holds " + std::to_string(waiting_.size()) + " documents waiting for memory (--max-queue " +
                                std::to_string(s_.max_queue) + "); retry later");
            waiting_.push_back(j);
            counters.documents_in += 1;
            counters.tokens_in += j->ids.size();
            admit_locked();
        }
        cv_.notify_all();
    }

    // Stops taking jobs; jobs in flight get until `deadline` to finish, then are cancelled.
    // Returns when every thread has ended.
    void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0)) {
        {
            std::unique_lock<std::mutex> l(m_);
            if (stopped_) return;
            stopping_ = true;
            for (auto& j : waiting_) fail(*j, "server.shutting_down", "the server stopped before this document was admitted");
            waiting_.clear();
            cv_.notify_all();
            cv_.wait_for(l, grace, [&] { return in_flight_ == 0; });
            cancel_all_ = true;
            stopped_ = true;
        }
        cv_.notify_all();
        for (auto& t : lanes_)
            if (t.joinable()) t.join();
        if (dispatcher_.joinable()) dispatcher_.join();
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return cohorts_running_ == 0; });
    }

    // For /metrics and /health.
    struct snapshot {
        std::size_t waiting = 0, encoding = 0, decoding = 0;
        double reserved_bytes = 0;
    };
    snapshot state() const {
        const std::lock_guard<std::mutex> l(m_);
        snapshot s;
        s.waiting = waiting_.size();
        s.encoding = lane_queue_[0].size() + lane_queue_[1].size() + encoding_now_;
        const std::size_t before = s.encoding + encoded_.size();
        s.decoding = in_flight_ > before ? in_flight_ - before : 0;
        s.reserved_bytes = reserved_;
        return s;
    }
    const scheduler_settings& settings() const { return s_; }

    scheduler_counters counters;

private:
    struct cancelled_now {};

    // A running batch of greedy or sampled jobs, which encoded jobs join (group_of).
    struct running {
        std::string key;
        std::vector<std::shared_ptr<job>> joining;  // handed over by dispatch(), taken before a step
        index_t tokens = 0;                         // input tokens of its jobs (joining or decoding)
    };
    static bool joinable(const job& j) { return j.go.num_beams <= 1; }
    // Jobs that may share a batch: a running batch takes every greedy or sampled job of the same
    // length (its rows' capacity, which the memory estimate assumes: memory_request::
    // joins_running_batch), whatever its other settings; a cohort, the jobs with equal settings.
    static std::string group_of(const job& j) {
        return joinable(j) ? "running;positions=" + std::to_string(j.go.total_length()) : j.batch_key;
    }

    static void fail(job& j, const std::string& id, const std::string& message) {
        {
            const std::lock_guard<std::mutex> l(j.m);
            j.ph = job::phase::failed;
            j.failure = {id, message};
            j.enc = {};
            ++j.version;
        }
        j.changed.notify_all();
    }

    static void fail_if_running(job& j, const std::string& id, const std::string& message) {
        {
            const std::lock_guard<std::mutex> l(j.m);
            if (j.finished()) return;
        }
        fail(j, id, message);
    }

    // Waiting jobs that fit the budget go to their lane, in arrival order (the first that does
    // not fit holds the rest: a large document is not overtaken forever).
    void admit_locked() {
        while (!waiting_.empty()) {
            auto& j = waiting_.front();
            if (j->cancelled) {
                counters.cancelled += 1;
                fail(*j, "server.cancelled", "the client went away");
                waiting_.pop_front();
                continue;
            }
            if (s_.weights_bytes + reserved_ + j->bytes > s_.budget_bytes) break;
            reserved_ += j->bytes;
            ++in_flight_;
            lane_queue_[short_model_ && static_cast<index_t>(j->ids.size()) > s_.long_tokens ? 1 : 0].push_back(j);
            waiting_.pop_front();
        }
    }

    // A job leaves: its memory returns and waiting jobs may start.
    void retire(const std::shared_ptr<job>& j) {
        {
            const std::lock_guard<std::mutex> l(m_);
            reserved_ -= j->bytes;
            if (--in_flight_ == 0) reserved_ = 0;  // no rounding left over from the sums
            admit_locked();
        }
        cv_.notify_all();
    }

    void encode_lane(int lane) {
        set_num_threads(s_.threads);
        for (;;) {
            std::shared_ptr<job> j;
            {
                std::unique_lock<std::mutex> l(m_);
                cv_.wait(l, [&] { return stopped_ || !lane_queue_[lane].empty(); });
                if (lane_queue_[lane].empty()) return;
                j = lane_queue_[lane].front();
                lane_queue_[lane].pop_front();
                ++encoding_now_;
                lane_busy_[lane] = true;
            }
            encode_one(*j, lane == 0 && short_model_ ? *short_model_ : model_, /*long_work=*/lane == 1);
            bool encoded = false;
            {
                const std::lock_guard<std::mutex> jl(j->m);
                encoded = j->ph == job::phase::encoded;
            }
            {
                const std::lock_guard<std::mutex> l(m_);
                --encoding_now_;
                lane_busy_[lane] = false;
                if (encoded && stopped_) encoded = false;
                if (encoded) encoded_.push_back(j);
            }
            if (!encoded) {
                fail_if_running(*j, "server.cancelled", "the server stopped before this document was decoded");
                retire(j);
            }
            cv_.notify_all();
        }
    }

    void encode_one(job& j, model_type& model, bool long_work) {
        if (j.cancelled || cancel_all_) {
            counters.cancelled += 1;
            fail(j, "server.cancelled", cancel_all_ ? "the server stopped before this document was encoded" : "the client went away");
            return;
        }
        {
            const std::lock_guard<std::mutex> l(j.m);
            j.ph = job::phase::encoding;
            ++j.version;
        }
        j.changed.notify_all();
        const auto t0 = clock::now();
        turns_.acquire(long_work);
        try {
            if (s_.sled) model.set_prefix_length(j.prefix_length);  // SLED's question (a plain model reads it as ids)
            auto enc = model.encode(j.ids.data(), nullptr, 1, static_cast<index_t>(j.ids.size()), [&](const models::encode_progress& p) {
                if (j.cancelled || cancel_all_) throw cancelled_now{};
                double f = p.layers > 0
                    ? (static_cast<double>(p.layer) + (p.tokens > 0 ? static_cast<double>(p.tokens_done) / p.tokens : 0)) /
                        static_cast<double>(p.layers)
                    : 0;
                if (p.chunks > 0) f = static_cast<double>(p.chunk) / static_cast<double>(p.chunks);
                if (p.cross_cache) f = 1;
                {
                    const std::lock_guard<std::mutex> l(j.m);
                    j.encoded_fraction = std::min(1.0, std::max(j.encoded_fraction, f));
                    ++j.version;
                }
                j.changed.notify_all();
                turns_.yield(long_work);
            });
            turns_.release();
            const double s = std::chrono::duration<double>(clock::now() - t0).count();
            counters.encode_seconds += s;
            {
                const std::lock_guard<std::mutex> l(j.m);
                j.enc = std::move(enc);
                j.encode_s = s;
                j.encoded_fraction = 1;
                j.ph = job::phase::encoded;
                ++j.version;
            }
            j.changed.notify_all();
        } catch (const cancelled_now&) {
            turns_.release();
            counters.cancelled += 1;
            fail(j, "server.cancelled", cancel_all_ ? "the server stopped while this document was encoded" : "the client went away");
        } catch (const error& e) {
            turns_.release();
            fail(j, e.id(), e.message());
        } catch (const std::bad_alloc&) {
            turns_.release();
            fail(j, "memory.allocation_failed", "the encoder could not allocate its memory");
        } catch (const std::exception& e) {
            turns_.release();
            fail(j, "server.internal", e.what());
        }
    }

    // Hands encoded jobs to the running batches that take them, and starts batches and cohorts
    // for the others.
    void dispatch() {
        for (;;) {
            std::vector<std::shared_ptr<job>> cohort;
            std::shared_ptr<running> batch;
            {
                std::unique_lock<std::mutex> l(m_);
                cv_.wait(l, [&] {
                    if (stopped_) return true;
                    if (encoded_.empty()) return false;
                    for (const auto& j : encoded_)
                        if (taker_locked(*j)) return true;
                    if (cohorts_running_ >= s_.max_cohorts) return false;
                    // While more short documents are queued to encode, wait for them to join,
                    // unless what waits already fills a batch.
                    index_t tokens = 0;
                    for (const auto& j : encoded_) tokens += static_cast<index_t>(j->ids.size());
                    return (lane_queue_[0].empty() && !lane_busy_[0]) || tokens >= s_.max_batch_tokens;
                });
                if (stopped_ && encoded_.empty()) return;
                if (stopped_) {
                    for (auto& j : encoded_) fail(*j, "server.cancelled", "the server stopped before this document was decoded");
                    auto left = std::move(encoded_);
                    encoded_.clear();
                    l.unlock();
                    for (auto& j : left) retire(j);
                    continue;
                }
                // Jobs join the running batches that have room for them, between two of their steps.
                bool handed = false;
                for (auto it = encoded_.begin(); it != encoded_.end();) {
                    if (running* r = taker_locked(**it)) {
                        r->tokens += static_cast<index_t>((*it)->ids.size());
                        r->joining.push_back(*it);
                        it = encoded_.erase(it);
                        handed = true;
                    } else {
                        ++it;
                    }
                }
                if (handed || encoded_.empty() || cohorts_running_ >= s_.max_cohorts) continue;
                const std::string key = group_of(*encoded_.front());
                index_t tokens = 0;
                for (auto it = encoded_.begin(); it != encoded_.end();) {
                    const auto n = static_cast<index_t>((*it)->ids.size());
                    if (group_of(**it) == key && (cohort.empty() || tokens + n <= s_.max_batch_tokens)) {
                        tokens += n;
                        cohort.push_back(*it);
                        it = encoded_.erase(it);
                    } else {
                        ++it;
                    }
                }
                if (joinable(*cohort.front())) {
                    batch = std::make_shared<running>();
                    batch->key = key;
                    batch->tokens = tokens;
                    batch->joining = std::move(cohort);
                    running_.push_back(batch);
                }
                ++cohorts_running_;
            }
            counters.cohorts += 1;
            if (batch) std::thread([this, batch] { decode_running(batch); }).detach();
            else std::thread([this, cohort = std::move(cohort)] { decode_cohort(cohort); }).detach();
        }
    }

    // The running batch that job j can join now, if any.
    running* taker_locked(const job& j) const {
        if (!joinable(j)) return nullptr;
        const auto n = static_cast<index_t>(j.ids.size());
        for (const auto& r : running_)
            if (r->key == group_of(j) && r->tokens + n <= s_.max_batch_tokens) return r.get();
        return nullptr;
    }

    // A job leaves running batch r: its input no longer counts against the batch, its memory returns.
    void leave(running& r, const std::shared_ptr<job>& j) {
        {
            const std::lock_guard<std::mutex> l(m_);
            r.tokens -= static_cast<index_t>(j->ids.size());
        }
        retire(j);
    }

    // Greedy and sampled jobs of one length (group_of): a generation::running_batch, each job with
    // its own settings, that jobs join as dispatch() hands them over and leave as they end; it ends
    // when it has nothing to decode.
    void decode_running(const std::shared_ptr<running>& r) {
        set_num_threads(s_.threads);
        auto rb = std::make_unique<generation::running_batch<model_type>>(model_);
        struct member {
            std::uint64_t key;
            std::shared_ptr<job> j;
            clock::time_point joined;
        };
        std::vector<member> live;
        auto fail_and_leave = [&](member& x, const std::string& id, const std::string& message) {
            fail(*x.j, id, message);
            leave(*r, x.j);
        };
        for (;;) {
            std::vector<std::shared_ptr<job>> joined;
            {
                std::unique_lock<std::mutex> l(m_);
                if (r->joining.empty() && live.empty()) {
                    std::erase(running_, r);
                    break;
                }
                joined = std::move(r->joining);
                r->joining.clear();
            }
            for (const auto& j : joined) {
                member x{0, j, clock::now()};
                try {
                    model_type::encoded enc;
                    {
                        const std::lock_guard<std::mutex> l(j->m);
                        enc = std::move(j->enc);
                        j->enc = {};
                        j->ph = job::phase::decoding;
                        ++j->version;
                    }
                    j->changed.notify_all();
                    x.key = rb->add(std::move(enc), j->ids, j->go);
                    live.push_back(std::move(x));
                } catch (const error& e) { fail_and_leave(x, e.id(), e.message()); }
            }
            // Jobs whose clients went away leave before the step.
            for (auto it = live.begin(); it != live.end();) {
                if (it->j->cancelled || cancel_all_) {
                    rb->remove(it->key);
                    counters.cancelled += 1;
                    fail_and_leave(*it, "server.cancelled",
                                   cancel_all_ ? "the server stopped while this document was decoded" : "the client went away");
                    it = live.erase(it);
                } else {
                    ++it;
                }
            }
            if (live.empty()) continue;
            std::vector<generation::running_batch<model_type>::update> updates;
            const auto t0 = clock::now();
            turns_.acquire(false);
            try {
                updates = rb->step();
                counters.decode_steps += 1;
                counters.decode_rows += static_cast<std::uint64_t>(rb->rows_stepped());
                turns_.release();
            } catch (...) {
                turns_.release();
                std::string id = "server.internal", message = "decoding failed";
                try {
                    throw;
                } catch (const error& e) { id = e.id(), message = e.message(); } catch (const std::bad_alloc&) {
                    id = "memory.allocation_failed", message = "decoding could not allocate its memory";
                } catch (const std::exception& e) { message = e.what(); }
                // The batch's state is lost with the step: every job in it fails.
                for (auto& x : live) fail_and_leave(x, id, message);
                live.clear();
                rb = std::make_unique<generation::running_batch<model_type>>(model_);
                continue;
            }
            const auto now = clock::now();
            counters.decode_seconds += std::chrono::duration<double>(now - t0).count();
            for (const auto& u : updates) {
                const auto it = std::find_if(live.begin(), live.end(), [&](const member& x) { return x.key == u.key; });
                LOCOST_ASSERT(it != live.end());
                job& j = *it->j;
                if (!u.error_id.empty()) {
                    fail_and_leave(*it, u.error_id, u.error_message);
                    live.erase(it);
                    continue;
                }
                {
                    const std::lock_guard<std::mutex> l(j.m);
                    if (j.rows.empty()) j.rows.assign(u.tokens.size(), std::vector<std::int64_t>{j.go.start_token()});
                    for (std::size_t k = 0; k < u.tokens.size(); ++k) j.rows[k].push_back(u.tokens[k]);
                    if (j.first_token == clock::time_point{}) j.first_token = now;
                    if (u.done) {
                        j.sequences = u.sequences;
                        j.decode_s = std::chrono::duration<double>(now - it->joined).count();
                        j.ph = job::phase::done;
                    }
                    ++j.version;
                }
                j.changed.notify_all();
                if (u.done) {
                    counters.documents_out += 1;
                    leave(*r, it->j);
                    live.erase(it);
                }
            }
        }
        rb.reset();
        // The last use of the scheduler: stop() may destroy it as soon as the count reaches 0, so
        // the notification goes out under the lock.
        const std::lock_guard<std::mutex> l(m_);
        --cohorts_running_;
        cv_.notify_all();
    }

    void decode_cohort(const std::vector<std::shared_ptr<job>>& jobs) {
        set_num_threads(s_.threads);
        model_type::encoded batch;
        generation::token_rows encoder_ids;
        for (const auto& j : jobs) {
            const std::lock_guard<std::mutex> l(j->m);
            batch.precision = j->enc.precision;
            for (auto& d : j->enc.docs) batch.docs.push_back(std::move(d));
            j->enc = {};
            j->ph = job::phase::decoding;
            ++j->version;
            encoder_ids.push_back(j->ids);
            j->changed.notify_all();
        }
        const auto& go = jobs.front()->go;
        const bool streams = go.num_beams <= 1;  // beam rows are hypotheses, not choices: results at the end
        const auto t0 = clock::now();
        turns_.acquire(false);
        try {
            const auto res = generation::generate(model_, batch, encoder_ids, go, [&](const generation::step_event& e) {
                counters.decode_steps += 1;
                counters.decode_rows += static_cast<std::uint64_t>(e.rows);
                bool any_live = false;
                const index_t per = e.rows_per_doc;
                for (std::size_t d = 0; d < jobs.size(); ++d) {
                    job& j = *jobs[d];
                    if (j.cancelled || cancel_all_) continue;
                    any_live = true;
                    if (!streams) continue;
                    {
                        const std::lock_guard<std::mutex> l(j.m);
                        if (j.rows.empty()) j.rows.assign(static_cast<std::size_t>(per), std::vector<std::int64_t>{go.start_token()});
                        for (index_t k = 0; k < per; ++k) j.rows[static_cast<std::size_t>(k)].push_back((*e.tokens)[d * per + k]);
                        if (e.step == 0) j.first_token = clock::now();
                        ++j.version;
                    }
                    j.changed.notify_all();
                }
                if (!any_live) return false;
                turns_.yield(false);
                return true;
            });
            turns_.release();
            const double s = std::chrono::duration<double>(clock::now() - t0).count();
            counters.decode_seconds += s;
            const std::size_t per = jobs.empty() ? 1 : res.sequences.size() / jobs.size();
            for (std::size_t d = 0; d < jobs.size(); ++d) {
                job& j = *jobs[d];
                if (j.cancelled || cancel_all_) {
                    counters.cancelled += 1;
                    fail(j, "server.cancelled",
                         cancel_all_ ? "the server stopped while this document was decoded" : "the client went away");
                    continue;
                }
                {
                    const std::lock_guard<std::mutex> l(j.m);
                    for (std::size_t k = 0; k < per; ++k) j.sequences.push_back(res.sequences[d * per + k]);
                    j.decode_s = s;
                    if (j.first_token == clock::time_point{}) j.first_token = clock::now();
                    j.ph = job::phase::done;
                    ++j.version;
                }
                counters.documents_out += 1;
                j.changed.notify_all();
            }
        } catch (const error& e) {
            turns_.release();
            for (const auto& j : jobs) fail(*j, e.id(), e.message());
        } catch (const std::bad_alloc&) {
            turns_.release();
            for (const auto& j : jobs) fail(*j, "memory.allocation_failed", "decoding could not allocate its memory");
        } catch (const std::exception& e) {
            turns_.release();
            for (const auto& j : jobs) fail(*j, "server.internal", e.what());
        }
        batch = {};
        for (const auto& j : jobs) retire(j);
        // The last use of the scheduler: stop() may destroy it as soon as the count reaches 0, so
        // the notification goes out under the lock.
        const std::lock_guard<std::mutex> l(m_);
        --cohorts_running_;
        cv_.notify_all();
    }

    model_type& model_;
    model_type* short_model_;
    scheduler_settings s_;
    std::vector<std::shared_ptr<running>> running_;  // guarded by m_
    turn_lock turns_;
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<job>> waiting_;
    std::deque<std::shared_ptr<job>> lane_queue_[2];
    std::vector<std::shared_ptr<job>> encoded_;
    double reserved_ = 0;
    std::size_t in_flight_ = 0, encoding_now_ = 0;
    bool lane_busy_[2] = {false, false};
    int cohorts_running_ = 0;
    bool stopping_ = false, stopped_ = false;
    std::atomic<bool> cancel_all_{false};
    std::vector<std::thread> lanes_;
    std::thread dispatcher_;
};

}  // namespace locost::serve
