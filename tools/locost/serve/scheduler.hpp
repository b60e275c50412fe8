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
//   decoded    in a cohort: the encoded jobs with the same generation settings are decoded
//              together as one batch by generation::generate (each document's result is that of
//              its own run: generation/search.hpp and its tests), up to max_batch_tokens of input
//              per cohort. A cohort forms whenever encoded jobs wait and the short lane has
//              nothing more queued, so requests that arrive together decode together, and a
//              request that arrives while a cohort decodes starts its own cohort at once.
//
// Turns. The encoders and the cohorts share the cores by taking turns (turn_lock): an encoder
// offers the turn after every tile of every layer (the encoder's progress callback), a cohort
// after every decoding step. Short work (the short lane, decoding) goes before the long lane's,
// which still gets a turn once it has waited a second. So a short request's encoding and
// decoding steps run between the tiles of a book's encoder, waiting for one tile at most, and
// cohorts step in turn; the work itself runs on all the threads each time.
//
// Cancelling: a job's `cancelled` flag (the client went away) is seen at the encoder's next
// tile (the callback throws), at its cohort's next step (its rows are no longer read; a cohort
// whose every job is cancelled stops), or when it leaves the queue. The memory it reserved is
// returned when its cohort ends.
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

    // Starts cohorts from the encoded jobs.
    void dispatch() {
        for (;;) {
            std::vector<std::shared_ptr<job>> cohort;
            {
                std::unique_lock<std::mutex> l(m_);
                cv_.wait(l, [&] {
                    if (stopped_) return true;
                    if (encoded_.empty() || cohorts_running_ >= s_.max_cohorts) return false;
                    // While more short documents are queued to encode, wait for them to join,
                    // unless what waits already fills a cohort.
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
                const std::string key = encoded_.front()->batch_key;
                index_t tokens = 0;
                for (auto it = encoded_.begin(); it != encoded_.end();) {
                    const auto n = static_cast<index_t>((*it)->ids.size());
                    if ((*it)->batch_key == key && (cohort.empty() || tokens + n <= s_.max_batch_tokens)) {
                        tokens += n;
                        cohort.push_back(*it);
                        it = encoded_.erase(it);
                    } else {
                        ++it;
                    }
                }
                ++cohorts_running_;
            }
            counters.cohorts += 1;
            std::thread([this, cohort = std::move(cohort)] { decode_cohort(cohort); }).detach();
        }
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
