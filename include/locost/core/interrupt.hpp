// Stopping a long computation from the thread that runs it.
//
// One layer of a long encode can run for tens of seconds (the gated convolution of a
// 700K-token LOCOST layer, dense attention over 32K tokens), longer than any reasonable wait
// for Ctrl-C or a cancelled request. A program installs a check on the thread that calls the
// library:
//
//     locost::interrupt_check stop_here([&] { if (cancelled) throw my_cancelled{}; });
//     model.encode(...);   // my_cancelled leaves encode if `cancelled` is set meanwhile
//
// The CPU backend runs the calling thread's check before every parallel loop and, on that
// thread, between the loop's pieces of work (a few channels of a convolution, one block of
// attention rows), so a check is run every few milliseconds to a fraction of a second even
// inside one layer. What the check throws stops the loop's remaining pieces (the ones already
// running on other threads finish first), is rethrown on the calling thread and unwinds the
// library call, which frees what it allocated; the model is unchanged.
//
// The check runs often: it should be cheap, or limit itself (the Python module's reads a clock
// and takes the interpreter's lock at most every 50 ms). Checks nest: a new one replaces the
// previous one on its thread until it is destroyed. Threads without a check pay nothing.
#pragma once
#include <functional>
#include <utility>

namespace locost {

class interrupt_check {
public:
    explicit interrupt_check(std::function<void()> check) : check_(std::move(check)), previous_(current_) { current_ = this; }
    ~interrupt_check() { current_ = previous_; }
    interrupt_check(const interrupt_check&) = delete;
    interrupt_check& operator=(const interrupt_check&) = delete;

    // Runs the calling thread's check, if it has one; what the check throws propagates.
    static void poll() {
        if (current_ && current_->check_) current_->check_();
    }

    // Whether the calling thread has a check.
    static bool installed() { return current_ != nullptr && static_cast<bool>(current_->check_); }

    // The calling thread's check, held by a parallel loop that runs it itself between its
    // pieces: while held, poll() on this thread does nothing, so that the loops and products
    // nested inside a piece never throw out of a parallel region.
    class held {
    public:
        held() : check_(current_) { current_ = nullptr; }
        ~held() { current_ = check_; }
        held(const held&) = delete;
        held& operator=(const held&) = delete;
        void poll() const {
            if (check_ && check_->check_) check_->check_();
        }

    private:
        interrupt_check* check_;
    };

private:
    std::function<void()> check_;
    interrupt_check* previous_;
    static inline thread_local interrupt_check* current_ = nullptr;
};

}  // namespace locost
