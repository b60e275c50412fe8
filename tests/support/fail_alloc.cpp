// Fault injection for the tool's out-of-memory tests, loaded with LD_PRELOAD: every allocation of
// at least LOCOST_TEST_FAIL_ALLOC_BYTES bytes fails, as under a memory limit, on whichever thread
// asks; smaller ones go to glibc. Unlike `ulimit -v`, the failure does not depend on how much the
// run had already mapped, so a test can aim it at one buffer (a worker thread's attention scratch).
#include <cerrno>
#include <cstddef>
#include <cstdlib>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
}

namespace {

// 0 until the constructor has read the variable: allocations before it always succeed.
std::size_t limit = 0;

__attribute__((constructor)) void read_limit() {
    if (const char* s = std::getenv("LOCOST_TEST_FAIL_ALLOC_BYTES")) limit = std::strtoull(s, nullptr, 10);
}

bool refused(std::size_t n) {
    if (limit == 0 || n < limit) return false;
    errno = ENOMEM;
    return true;
}

}  // namespace

extern "C" {
void* malloc(std::size_t n) { return refused(n) ? nullptr : __libc_malloc(n); }
void* calloc(std::size_t count, std::size_t n) {
    return (n != 0 && limit != 0 && count >= limit / n) ? (errno = ENOMEM, nullptr) : __libc_calloc(count, n);
}
void* realloc(void* p, std::size_t n) { return refused(n) ? nullptr : __libc_realloc(p, n); }
void* memalign(std::size_t align, std::size_t n) { return refused(n) ? nullptr : __libc_memalign(align, n); }
void* aligned_alloc(std::size_t align, std::size_t n) { return memalign(align, n); }
int posix_memalign(void** out, std::size_t align, std::size_t n) {
    if (refused(n)) return ENOMEM;
    void* p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
}
