// The fused kernels of linear.hpp for a few rows (a decoding step) and row groups (a batch of
// documents decoding together), written once against simd_levels.hpp's names (fvec, flanes,
// fma_v, hadd_v, widen, in_register) and compiled at each level by at_levels.ipp (no include
// guard, on purpose).
// Each accumulator sums its row's products lane by lane in the order of k, then across lanes: the
// same operations for any number of rows, so a row's result does not depend on its neighbours at
// a given level (another level has other lanes, so other roundings, within the tests' bounds).

// y[i, o] for R rows from channel o's accumulators: lanes summed, then the k beyond the last
// whole vector, then the scales (alpha, and int8's per channel).
template <class Stored, int R>
void finish_sums(const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha, bool accumulate, index_t o,
                 const fvec* s) {
    const index_t K = w.in, kv = K / flanes * flanes;
    const Stored* row = static_cast<const Stored*>(w.data) + o * K;
    const float sc = alpha * (w.scale ? w.scale[o] : 1.0f);
    for (int i = 0; i < R; ++i) {
        float d = hadd_v(s[i]);
        for (index_t k = kv; k < K; ++k) d += x[i * ldx + k] * widen_one(row[k]);
        float& out = y[i * ldy + o];
        out = accumulate ? out + sc * d : sc * d;
    }
}

// Rows of x packed for the fused kernel: step j's R vectors side by side (xp[j·R + i] =
// x[i, j·flanes : (j + 1)·flanes]), so that one pointer with constant offsets reaches them all:
// with a pointer per row, eight rows, the channels' pointers and the loop's own did not fit the
// 16 general registers and GCC kept some on the stack, reloaded every step.
template <int R>
const fvec* pack_rows(const float* x, index_t ldx, index_t kv) {
    thread_local growing_buffer<fvec> packed;
    fvec* p = packed.at_least(static_cast<std::size_t>(R * (kv / flanes)));
    for (index_t j = 0; j < kv / flanes; ++j)
        for (int i = 0; i < R; ++i) p[j * R + i] = fvec::load_unaligned(x + i * ldx + j * flanes);
    return p;
}

// A pass of the row groups below over one stretch of k: the next block of channels is pulled
// into L2 a few lines a step; between stretches a group's accumulators wait in `acc` (the same
// sums, continued in the same order).
struct row_group_pass {
    const char* next = nullptr;  // the next block's bytes not yet prefetched
    const char* end = nullptr;
    index_t lines = 0;       // lines to prefetch a step
    index_t k0 = 0, k1 = 0;  // this stretch of k (multiples of flanes)
    bool first = true, last = true;
    fvec* acc = nullptr;  // (channel − block0, row) accumulators between stretches
    index_t block0 = 0;
};

// Output channels [o0, o1) for R rows of x (packed: xp), C channels at a time (C·R accumulators
// in registers). Each accumulator sums its row's products lane by lane in the order of k, then
// across lanes (finish_sums): the same operations for any R, C and stretches of k, so a row's
// result does not depend on its neighbours. Without a pass: all of k, each channel group
// prefetching the next one (a decoding step: the weights come from memory once). With a pass:
// its stretch of k, prefetching its next block into L2.
template <class Stored, int R, int C, bool Grouped>
void fused_rows(const ops::weight_view& w, const fvec* xp, const float* x, index_t ldx, float* y, index_t ldy, float alpha, bool accumulate,
                index_t o0, index_t o1, row_group_pass* pass) {
    const auto* W = static_cast<const Stored*>(w.data);
    const index_t K = w.in, kv = K / flanes * flanes;
    const index_t k0 = pass ? pass->k0 : 0, k1 = pass ? pass->k1 : kv;
    const bool first = !pass || pass->first, last = !pass || pass->last;
    index_t o = o0;
    for (; o + C <= o1; o += C) {
        fvec s[C][R];
        fvec* saved = pass ? pass->acc + (o - pass->block0) * R : nullptr;
        for (int c = 0; c < C; ++c)
            for (int i = 0; i < R; ++i) s[c][i] = first ? fvec(0.0f) : saved[c * R + i];
        const Stored* wp = W + o * K + k0;
        const fvec* xq = xp + k0 / flanes * R;
        // Without a pass, the next channel group is prefetched a slice per step: one step here
        // consumes a quarter (int8) or half (bfloat16) of a cache line per channel, too little
        // for the out-of-order window to keep enough lines in flight on its own (measured: int8
        // read at 8 GB/s per core without this, at the bandwidth with it).
        constexpr index_t ahead = static_cast<index_t>(C * flanes * sizeof(Stored));  // bytes of the next group per step
        const char* next = reinterpret_cast<const char*>(W + (o + C) * K);
        const char* pf = pass ? pass->next : nullptr;
        const char* const pf_end = pass ? pass->end : nullptr;
        const index_t pf_bytes = pass ? pass->lines * 64 : 0;
        for (index_t j = (k1 - k0) / flanes; j > 0; --j, wp += flanes, xq += R) {
            if constexpr (!Grouped) {
                for (index_t b = 0; b < ahead; b += 64) LOCOST_PREFETCH_T0(next + b);
                next += ahead;
            } else if (pf < pf_end) {
                for (index_t b = 0; b < pf_bytes; b += 64) LOCOST_PREFETCH_T1(pf + b);
                pf += pf_bytes;
            }
            fvec wv[C];
            for (int c = 0; c < C; ++c) wv[c] = widen(wp + c * K);
            for (int i = 0; i < R; ++i) {
                const fvec xv = in_register(xq[i]);
                for (int c = 0; c < C; ++c) s[c][i] = fma_v(xv, wv[c], s[c][i]);
            }
        }
        if (pass) pass->next = pf;
        for (int c = 0; c < C; ++c) {
            if (last) finish_sums<Stored, R>(w, x, ldx, y, ldy, alpha, accumulate, o + c, s[c]);
            else
                for (int i = 0; i < R; ++i) saved[c * R + i] = s[c][i];
        }
    }
    if constexpr (C > 1)
        if (o < o1) fused_rows<Stored, R, 1, Grouped>(w, xp, x, ldx, y, ldy, alpha, accumulate, o, o1, pass);
}

// Channels at a time for R rows: R·C accumulators, C weight vectors and one row's x within
// AVX-512's 32 registers (one or two rows: four channels, enough independent chains; measured
// on the Xeon: eight rows from L2 at 90 GFLOP/s a core with three, 82 with two, 73 with four).
template <int R>
inline constexpr int linear_channels = R <= 2 ? 4 : 3;

// Up to linear_fused_rows rows (x packed here unless the caller did), all channels of [o0, o1).
template <class Stored, int R = 1>
void linear_few_rows_dispatch(index_t rows, const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha,
                              bool accumulate, index_t o0, index_t o1, row_group_pass* pass = nullptr, const fvec* xp = nullptr) {
    if constexpr (R < linear_fused_rows) {
        if (rows != R) return linear_few_rows_dispatch<Stored, R + 1>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1, pass, xp);
    }
    if (!xp) xp = pack_rows<R>(x, ldx, w.in / flanes * flanes);
    if (pass) fused_rows<Stored, R, linear_channels<R>, true>(w, xp, x, ldx, y, ldy, alpha, accumulate, o0, o1, pass);
    else fused_rows<Stored, R, (R <= 2 ? 4 : 2), false>(w, xp, x, ldx, y, ldy, alpha, accumulate, o0, o1, nullptr);
}

// The row groups' schedule: blocks of channels that stay in L2 (the next block is pulled into
// L2 while the groups work on this one), and within a block, stretches of k short enough that a
// group's rows of x stay in L1 (eight rows of 3,072 floats would not: every step would then load
// nine lines from L2 instead of three).
template <class Stored>
void linear_row_groups(index_t rows, const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha,
                       bool accumulate, index_t o0, index_t o1) {
    constexpr index_t group = linear_fused_rows;
    const index_t K = w.in, kv = K / flanes * flanes;
    const index_t channel_bytes = K * static_cast<index_t>(sizeof(Stored));
    const index_t block = std::max<index_t>(4, (index_t{192} << 10) / std::max<index_t>(1, channel_bytes));
    // A stretch: at most 24 KiB of a group's x (half of a 48 KiB L1), in whole vectors.
    const index_t stretch = std::max(flanes, (index_t{24} << 10) / (group * index_t{sizeof(float)}) / flanes * flanes);
    const index_t groups = (rows + group - 1) / group;
    thread_local growing_buffer<fvec> saved, packed;
    row_group_pass pass;
    if (kv > stretch) pass.acc = saved.at_least(static_cast<std::size_t>(block * group));
    // Every group's rows packed once (pack_rows' layout, a group after another).
    fvec* xp = packed.at_least(static_cast<std::size_t>(rows * (kv / flanes)));
    for (index_t r = 0; r < rows; r += group) {
        const index_t n = std::min(group, rows - r);
        for (index_t j = 0; j < kv / flanes; ++j)
            for (index_t i = 0; i < n; ++i) xp[r * (kv / flanes) + j * n + i] = fvec::load_unaligned(x + (r + i) * ldx + j * flanes);
    }
    const auto* base = static_cast<const char*>(w.data);
    for (index_t b0 = o0; b0 < o1; b0 += block) {
        const index_t b1 = std::min(o1, b0 + block), n1 = std::min(o1, b1 + block);
        // The next block's lines spread over this block's steps (every group, channel group, k).
        const index_t steps = std::max<index_t>(1, groups * ((b1 - b0 + 2) / 3) * (kv / flanes));
        pass.next = base + b1 * channel_bytes;
        pass.end = base + n1 * channel_bytes;
        pass.lines = ((n1 - b1) * channel_bytes / 64 + steps - 1) / steps;
        pass.block0 = b0;
        for (index_t r = 0; r < rows; r += group) {
            for (index_t k0 = 0; k0 < kv || k0 == 0; k0 += stretch) {
                pass.k0 = k0;
                pass.k1 = std::min(kv, k0 + stretch);
                pass.first = k0 == 0;
                pass.last = pass.k1 == kv;
                linear_few_rows_dispatch<Stored>(std::min(group, rows - r), w, x + r * ldx, ldx, y + r * ldy, ldy, alpha, accumulate, b0,
                                                 b1, &pass, xp + r * (kv / flanes));
            }
        }
    }
}

// Output channels [o0, o1) for rows ≤ linear_grouped_rows.
template <class Stored>
void linear_rows(index_t rows, const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha, bool accumulate,
                 index_t o0, index_t o1) {
    if (rows <= linear_fused_rows) linear_few_rows_dispatch<Stored>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1);
    else linear_row_groups<Stored>(rows, w, x, ldx, y, ldy, alpha, accumulate, o0, o1);
}
