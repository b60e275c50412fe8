// locost serve: the server's view of its client connections, beside cpp-httplib's.
//
// cpp-httplib bounds each read from a socket by its read timeout, not a whole request: a client
// that sends one byte every few seconds would hold a worker thread forever. It also gives a
// handler no way to see that its client has gone. This registry finds the server's connected
// sockets itself (the process's descriptors, each a socket whose local port is the server's),
// times each request from its first byte (or the end of the previous response) to the moment
// its handler starts, and shuts down the connections that take longer than the read limit; and
// it tells a handler whether its client's side of the connection is closed.
#pragma once
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace locost::serve {

class connections {
public:
    connections(int port, std::chrono::seconds read_limit) : port_(port), limit_(read_limit) {
        watch_ = std::thread([this] { watch(); });
    }
    ~connections() {
        {
            const std::lock_guard<std::mutex> l(m_);
            stop_ = true;
        }
        cv_.notify_all();
        if (watch_.joinable()) watch_.join();
    }
    void set_port(int port) {
        const std::lock_guard<std::mutex> l(m_);
        port_ = port;
    }

    // A request from (addr, port) was read whole: its handler runs, and the read limit stops
    // counting until the response is written (done()).
    void handling(const std::string& addr, int port) { mark(addr, port, true); }
    void done(const std::string& addr, int port) { mark(addr, port, false); }

    // Whether the client at (addr, port) has closed its side (or reset the connection).
    bool closed(const std::string& addr, int port) {
        const std::lock_guard<std::mutex> l(m_);
        scan_locked();
        const auto it = by_peer_.find(peer_key(addr, port));
        if (it == by_peer_.end()) return false;  // not seen (yet): a write to it will tell
        const int fd = it->second;
        struct pollfd p {
            fd, POLLIN | POLLRDHUP, 0
        };
        if (::poll(&p, 1, 0) < 0) return false;
        if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
        if (p.revents & POLLIN) {
            char c;
            return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
        }
        return false;
    }

    std::uint64_t slow_clients() const { return slow_.load(); }

private:
    struct entry {
        ino_t inode = 0;
        std::string peer;
        std::chrono::steady_clock::time_point since;
        bool handling = false;
    };

    static std::string peer_key(const std::string& addr, int port) { return addr + "|" + std::to_string(port); }

    void mark(const std::string& addr, int port, bool handling) {
        const std::lock_guard<std::mutex> l(m_);
        scan_locked();
        const auto it = by_peer_.find(peer_key(addr, port));
        if (it == by_peer_.end()) return;
        auto& e = fds_[it->second];
        e.handling = handling;
        e.since = std::chrono::steady_clock::now();
    }

    // The process's connected TCP sockets on the server's port, by descriptor and by peer.
    void scan_locked() {
        std::map<int, entry> now;
        by_peer_.clear();
        DIR* d = ::opendir("/proc/self/fd");
        if (!d) return;
        while (dirent* de = ::readdir(d)) {
            char* end = nullptr;
            const long fd = std::strtol(de->d_name, &end, 10);
            if (end == de->d_name || *end != 0 || fd == ::dirfd(d)) continue;
            struct stat st {};
            if (::fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
            sockaddr_storage local{}, peer{};
            socklen_t ll = sizeof local, pl = sizeof peer;
            if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
            if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;  // listening
            int local_port = 0, peer_port = 0;
            char host[INET6_ADDRSTRLEN] = {};
            if (local.ss_family == AF_INET) {
                local_port = ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
                const auto* p = reinterpret_cast<sockaddr_in*>(&peer);
                peer_port = ntohs(p->sin_port);
                ::inet_ntop(AF_INET, &p->sin_addr, host, sizeof host);
            } else if (local.ss_family == AF_INET6) {
                local_port = ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
                const auto* p = reinterpret_cast<sockaddr_in6*>(&peer);
                peer_port = ntohs(p->sin6_port);
                ::inet_ntop(AF_INET6, &p->sin6_addr, host, sizeof host);
            } else {
                continue;
            }
            if (local_port != port_) continue;
            const auto old = fds_.find(static_cast<int>(fd));
            entry e;
            if (old != fds_.end() && old->second.inode == st.st_ino) e = old->second;
            else e = {st.st_ino, peer_key(host, peer_port), std::chrono::steady_clock::now(), false};
            by_peer_[e.peer] = static_cast<int>(fd);
            now[static_cast<int>(fd)] = e;
        }
        ::closedir(d);
        fds_ = std::move(now);
    }

    void watch() {
        std::unique_lock<std::mutex> l(m_);
        while (!stop_) {
            cv_.wait_for(l, std::chrono::milliseconds(250));
            if (stop_) break;
            scan_locked();
            const auto now = std::chrono::steady_clock::now();
            for (auto& [fd, e] : fds_) {
                if (e.handling || now - e.since < limit_) continue;
                struct stat st {};
                if (::fstat(fd, &st) != 0 || st.st_ino != e.inode) continue;
                ::shutdown(fd, SHUT_RDWR);  // the worker's read fails; cpp-httplib closes the socket
                e.handling = true;          // once
                slow_ += 1;
            }
        }
    }

    int port_;
    std::chrono::seconds limit_;
    std::mutex m_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::map<int, entry> fds_;
    std::map<std::string, int> by_peer_;
    std::atomic<std::uint64_t> slow_{0};
    std::thread watch_;
};

}  // namespace locost::serve
