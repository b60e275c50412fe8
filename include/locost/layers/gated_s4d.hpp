// Gated S4D layer with pre-norm and residual (LOCOSTLayerSelfAttention + S4D.forward) — LOCOST
// §4.1 (eq. 3) and §4.2 (the gating); docs/models.md §1.3:
//
//     u = RMSNorm(x)                       layer.0.layer_prenorm
//     v = u·Wkᵀ + bk                       k_proj (the paper's V)
//     v = v ⊙ mask                         padding zeroed after the bias, before the convolution
//     y = BiConv(v)                        §1.2, including D·v
//     q = u·Wqᵀ + bq                       q_proj, no activation (Gating); q = 1 otherwise
//     x = x + (y ⊙ q)·Woᵀ + bo             output_linear, residual
//
// Memory. The convolution needs all L positions of v at once; nothing else does. So v lives in
// one (B·L, H) buffer that the convolution overwrites with y, and every pointwise step runs in
// tiles of rows: u is recomputed per tile (2·H flops per row, against 6·H² in the GEMMs) instead
// of being kept. Peak: x + one (B·L, H) buffer + tile buffers + the convolution's per-thread
// group buffers + the kernel cache (below).
//
// Kernel cache. K[c, h, 0..L) is cached per layer in time domain (valid for every shorter
// length), as long as a budget shared by all layers allows; otherwise kernels are generated per
// channel group inside the convolution and dropped (long inputs: at 700K tokens the base model's
// kernels would need 51 GB).
#pragma once
#include <atomic>
#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "../ops/bidirectional_conv.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/gemm.hpp"
#include "../ops/ssm_kernels.hpp"
#include "parameter.hpp"
#include "rms_norm.hpp"
#include "s4d_kernel.hpp"
#include "tensor_source.hpp"
#include "weight_matrix.hpp"

namespace locost::layers {

// Bytes of kernel cache that the layers of one model may still take.
class kernel_cache_budget {
public:
    explicit kernel_cache_budget(std::size_t bytes) : left_(static_cast<std::int64_t>(bytes)) {}
    bool take(std::size_t bytes) {
        auto want = static_cast<std::int64_t>(bytes);
        auto cur = left_.load();
        while (cur >= want)
            if (left_.compare_exchange_weak(cur, cur - want)) return true;
        return false;
    }
    void give_back(std::size_t bytes) { left_ += static_cast<std::int64_t>(bytes); }

private:
    std::atomic<std::int64_t> left_;
};

template <class Scalar, class Backend, bool Bidirectional, bool Gating>
class gated_s4d {
public:
    static constexpr index_t channels = Bidirectional ? 2 : 1;

    struct weights {
        tensor<float> prenorm;           // (H)
        s4d_kernel_parameters kernel;    // log_dt, inv_A_real, A_imag, B, C
        tensor<float> D;                 // (H)
        tensor<float> q_weight, q_bias;  // (H, H), (H): Gating only
        tensor<float> k_weight, k_bias;  // (H, H), (H)
        tensor<float> o_weight, o_bias;  // (H, H), (H)
    };
    // The original's LOCOSTLayerSelfAttention under `sub`: layer_prenorm.weight, and its S4D module
    // ssm_layer with the kernel's parameters, D, q_proj (gating), k_proj and output_linear. The
    // kernel and D cover `kernel_H` channels (H / num_ssm_heads: groups of channels share a kernel in
    // the original; only 1 group runs here, so a reader validating another count reads its shapes).
    static weights read(const tensor_source& sub, index_t H, index_t modes, index_t kernel_H) {
        constexpr auto large = param_storage::large_product;
        const tensor_source m = sub / "ssm_layer";
        weights w;
        w.prenorm = rms_norm<float, cpu>::read(sub / "layer_prenorm", H);
        w.kernel = s4d_kernel_parameters::read(m / "kernel", channels, kernel_H, modes);
        w.D = m.get("D", {kernel_H}, {param_kind::s4d_d});
        auto linear = [&](const char* name, tensor<float>& weight, tensor<float>& bias) {
            weight = (m / name).get("weight", {H, H}, {param_kind::projection, large});
            bias = (m / name).get("bias", {H}, {param_kind::bias});
        };
        if constexpr (Gating) linear("q_proj", w.q_weight, w.q_bias);
        linear("k_proj", w.k_weight, w.k_bias);
        linear("output_linear", w.o_weight, w.o_bias);
        return w;
    }

    // What every S4D layer of a stack reads for one input: the padding mask (B·L) of 0/1 in the
    // backend's memory, or none.
    struct inputs {
        std::vector<Scalar> host_mask;
        backend_array<Scalar, Backend> mask;
        // mask (B·L) of 0/1 on the host, or nullptr; an all-ones mask is none.
        void prepare(const float* m, index_t n) {
            host_mask.clear();
            if (m && !std::all_of(m, m + n, [](float v) { return v == 1.0f; }))
                for (index_t i = 0; i < n; ++i) host_mask.push_back(static_cast<Scalar>(m[i]));
            mask = backend_array<Scalar, Backend>(host_mask);
        }
    };

    // p: the projections' precision (bf16/int8 products under compute = bf16/int8,
    // models/options.hpp); the pointwise steps run in tiles of tile_rows rows; conv: how the
    // convolution runs (ops/bidirectional_conv.hpp).
    gated_s4d(const weights& w, double eps, kernel_cache_budget* budget, weight_precision p = weight_precision::native,
              index_t tile_rows = 1024, const ops::conv_options& conv = {})
        : norm_(w.prenorm, eps), kernel_(w.kernel), D_(to_backend<Scalar, Backend>(w.D)), Wk_(w.k_weight, p),
          bk_(to_backend<Scalar, Backend>(w.k_bias)), Wo_(w.o_weight, p), bo_(to_backend<Scalar, Backend>(w.o_bias)), H_(w.k_weight.dim(0)),
          tile_(std::max<index_t>(1, tile_rows)), conv_(conv), budget_(budget) {
        if constexpr (Gating) {
            Wq_ = weight_matrix<Scalar, Backend>(w.q_weight, p);
            bq_ = to_backend<Scalar, Backend>(w.q_bias);
        }
    }
    gated_s4d(gated_s4d&& o) noexcept
        : norm_(std::move(o.norm_)), kernel_(std::move(o.kernel_)), D_(std::move(o.D_)), Wq_(std::move(o.Wq_)), bq_(std::move(o.bq_)),
          Wk_(std::move(o.Wk_)), bk_(std::move(o.bk_)), Wo_(std::move(o.Wo_)), bo_(std::move(o.bo_)), H_(o.H_), tile_(o.tile_),
          conv_(o.conv_), budget_(o.budget_), cache_(std::move(o.cache_)), cached_len_(o.cached_len_) {
        o.cached_len_ = 0;
    }
    ~gated_s4d() { drop_cache(); }

    // Scratch forward() needs: the convolution's (B·L, H) buffer v, and u and q per tile row.
    index_t scratch_size(index_t B, index_t L) const noexcept { return B * L * H_ + std::min(tile_, B * L) * scratch_per_row(H_); }
    static constexpr index_t scratch_per_row(index_t H) noexcept { return 2 * H; }

    // x (B·L, H) += S4D(RMSNorm(x)) for the input `in` describes.
    void forward(Scalar* x, index_t B, index_t L, const inputs& in, Scalar* scratch) const {
        const index_t rows = B * L, H = H_, tile_rows = std::min(tile_, rows);
        const Scalar* mask = in.mask.data();
        Scalar* v = scratch;            // (B·L, H)
        Scalar* u = v + rows * H;       // (tile, H)
        Scalar* q = u + tile_rows * H;  // (tile, H)
        // v = mask ⊙ (RMSNorm(x)·Wkᵀ + bk)
        for (index_t r0 = 0; r0 < rows; r0 += tile_rows) {
            const index_t n = std::min(tile_rows, rows - r0);
            norm_.forward(x + r0 * H, u, n);
            Wk_.apply(u, v + r0 * H, n);
            ops::add_rows<Backend>(v + r0 * H, bk_.data(), n, H);
            if (mask) ops::scale_rows<Backend>(v + r0 * H, mask + r0, n, H);
        }
        // y = BiConv(v), in place
        prepare_kernels(L);
        std::vector<typename s4d_kernel<Scalar, Backend>::scratch> kernel_scratch;  // per thread, on-the-fly kernels
        if (cached_len_ < L) kernel_scratch.resize(static_cast<std::size_t>(num_threads()));
        ops::bidirectional_conv<Backend>(v, v, B, L, H, channels, D_.data(), kernel_source(kernel_scratch), conv_);
        // x += (y ⊙ q)·Woᵀ + bo
        for (index_t r0 = 0; r0 < rows; r0 += tile_rows) {
            const index_t n = std::min(tile_rows, rows - r0);
            Scalar* y = v + r0 * H;
            if constexpr (Gating) {
                norm_.forward(x + r0 * H, u, n);
                Wq_.apply(u, q, n);
                ops::add_rows<Backend>(q, bq_.data(), n, H);
                ops::mul<Backend>(y, q, n * H);
            }
            ops::add_rows<Backend>(x + r0 * H, bo_.data(), n, H);
            Wo_.apply(y, x + r0 * H, n, /*accumulate=*/true);
        }
    }

    const s4d_kernel<Scalar, Backend>& kernel() const noexcept { return kernel_; }
    // Length the cached kernels cover (0: none).
    index_t cached_length() const noexcept { return cached_len_; }

    void drop_cache() {
        const std::lock_guard<std::mutex> lock(cache_mutex_);
        if (cached_len_ && budget_) budget_->give_back(cache_bytes(cached_len_));
        cache_ = tensor<Scalar, Backend>();
        cached_len_ = 0;
    }

private:
    std::size_t cache_bytes(index_t L) const { return static_cast<std::size_t>(H_ * channels * L) * sizeof(Scalar); }

    // Extends the cache to L when the budget allows; otherwise leaves it (kernels are then
    // generated inside the convolution).
    void prepare_kernels(index_t L) const {
        const std::lock_guard<std::mutex> lock(cache_mutex_);
        if (cached_len_ >= L || !budget_) return;
        const std::size_t old_bytes = cached_len_ ? cache_bytes(cached_len_) : 0, new_bytes = cache_bytes(L);
        if (!budget_->take(new_bytes - old_bytes)) return;
        tensor<Scalar, Backend> fresh({H_, channels, L});
        ops::ssm_kernels<Backend>(kernel_, 0, H_, L, fresh.data());
        cache_ = std::move(fresh);
        cached_len_ = L;
    }

    // The convolution's kernel source: cached rows, or generated per group. On the host either
    // way is zero from the group's largest support on (s4d_kernel::compute), which it reports;
    // a device backend generates whole kernels, so there it reports none.
    struct kernel_source_t {
        const gated_s4d* self;
        std::vector<typename s4d_kernel<Scalar, Backend>::scratch>* scratch;
        void operator()(index_t h0, index_t h1, index_t L, Scalar* out, int thread) const {
            if (self->cached_len_ >= L)
                transfer<Backend>::copy_2d(out, L, self->cache_.data() + h0 * channels * self->cached_len_, self->cached_len_, L,
                                           (h1 - h0) * channels);
            else ops::ssm_kernel_group<Backend>(self->kernel_, h0, h1, L, out, (*scratch)[static_cast<std::size_t>(thread)]);
        }
        index_t support(index_t h0, index_t h1) const {
            if constexpr (!ops::kernel_groups_stop_at_support<Backend, Scalar>) return std::numeric_limits<index_t>::max();
            index_t s = 0;
            for (index_t h = h0; h < h1; ++h) s = std::max(s, self->kernel_.support(h));
            return s;
        }
    };
    kernel_source_t kernel_source(std::vector<typename s4d_kernel<Scalar, Backend>::scratch>& scratch) const { return {this, &scratch}; }

    rms_norm<Scalar, Backend> norm_;
    s4d_kernel<Scalar, Backend> kernel_;
    tensor<Scalar, Backend> D_;
    weight_matrix<Scalar, Backend> Wq_;
    tensor<Scalar, Backend> bq_;
    weight_matrix<Scalar, Backend> Wk_;
    tensor<Scalar, Backend> bk_;
    weight_matrix<Scalar, Backend> Wo_;
    tensor<Scalar, Backend> bo_;
    index_t H_;
    index_t tile_ = 1024;
    ops::conv_options conv_;
    kernel_cache_budget* budget_;
    // The kernel cache: filled by forward() (a const call: the layer's function does not change),
    // guarded by the mutex.
    mutable tensor<Scalar, Backend> cache_;  // (H, channels, cached_len_)
    mutable index_t cached_len_ = 0;
    mutable std::mutex cache_mutex_;
};

}  // namespace locost::layers
