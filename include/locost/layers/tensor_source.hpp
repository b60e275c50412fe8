// Where layers read their weights, and the record of what they read.
//
// A tensor's name is written once, by the layer that owns it. A layer's read() takes a
// tensor_source — a reader plus the prefix its family puts in front of the layer's names — and
// asks for each of its tensors by the name it has inside the layer, with its shape and what it is:
//
//     const tensor_source at = source / "encoder" / "block" / 3 / "layer" / 0;   (the family: where)
//     at.get("layer_norm.weight", {H}, {param_kind::norm_scale});              (the layer: what)
//
// Run over a checkpoint (checkpoint_reader), read() returns float32 tensors. Run over a
// parameter_recorder it reads nothing and records each request — name, shape, kind, how the
// runtime stores it, which stack reads it — and returns empty tensors. That record is the
// parameter list that validates a checkpoint, the weights term of the memory estimate, and the
// plan by which demo-checkpoint initialises each tensor: one code path, so they cannot disagree
// with the loader.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "../core/tensor.hpp"
#include "../io/checkpoint.hpp"

namespace locost::layers {

// What a tensor is to the layer that reads it (demo-checkpoint initialises by kind).
enum class param_kind : std::uint8_t {
    embedding,    // token table, rows gathered per token
    head,         // an untied LM head (vocab, d_model)
    logits_bias,  // added to every row of logits
    norm_scale,   // a normalisation's weight
    norm_shift,   // a LayerNorm's bias
    query,        // attention projections (out, in)
    key,
    value,
    attention_out,
    ff_in,  // feed-forward projections
    ff_out,
    projection,     // any other linear layer's weight
    bias,           // a linear layer's bias
    relative_bias,  // a relative-position bucket table (buckets, heads)
    positions,      // a learned position table
    global_tokens,  // learned global token embeddings
    s4d_log_dt,     // the S4D kernel's parameters (layers/s4d_kernel.hpp)
    s4d_a_real,
    s4d_a_imag,
    s4d_b,
    s4d_c,
    s4d_d,
};

// How the runtime keeps a tensor, which is what its bytes in memory depend on.
enum class param_storage : std::uint8_t {
    scalar,             // as read, in the scalar type
    large_product,      // a matrix of a product over every input position: in the compute precision
    per_step,           // a decoder matrix read once per generated token: in the weights precision
    complex_per_value,  // the S4D layer keeps one complex double (16 bytes) per stored value
    complex_per_pair,   // ... one complex double per stored (re, im) pair: 8 bytes per value
    folded_away,        // folded into the other S4D factors: nothing kept
};

// Which stack reads a tensor (a table both read is recorded once by each).
enum class model_stack : std::uint8_t { encoder, decoder };

struct param_info {
    param_kind kind = param_kind::projection;
    param_storage storage = param_storage::scalar;
    bool optional = false;  // absent from a checkpoint, the layer uses its default (get() returns empty)
};

// One recorded request.
struct param_record {
    std::string name;
    shape_t shape;
    param_info info;
    model_stack stack = model_stack::encoder;
    bool alias = false;  // not a stored tensor: the layer reuses one it read (a tied LM head)
};

class tensor_reader {
public:
    virtual ~tensor_reader() = default;
    // `name` as float32 of `shape`. Empty when this reader only records, or when the tensor is
    // optional and absent. Errors: the checkpoint's (missing tensor, shape, dtype, non-finite).
    virtual tensor<float> read(const std::string& name, const shape_t& shape, const param_info& info, model_stack stack) = 0;
    // A tensor the layer takes from another it read (a tied head): nothing to read, only to record.
    virtual void alias(const std::string&, const shape_t&, const param_info&, model_stack) {}
    virtual bool recording() const noexcept { return false; }
};

// A reader and the prefix of the names asked through it.
class tensor_source {
public:
    explicit tensor_source(tensor_reader& r, std::string prefix = {}, model_stack s = model_stack::encoder)
        : reader_(&r), prefix_(std::move(prefix)), stack_(s) {}

    // The source of the module `part` below this one ("…block." + "3" → "…block.3.").
    tensor_source operator/(std::string_view part) const {
        std::string p = prefix_;
        p.append(part).push_back('.');
        return tensor_source(*reader_, std::move(p), stack_);
    }
    tensor_source operator/(index_t i) const { return *this / std::string_view(std::to_string(i)); }
    // The same prefix, read by the other stack (the decoder's view of a shared embedding).
    tensor_source for_stack(model_stack s) const { return tensor_source(*reader_, prefix_, s); }

    tensor<float> get(std::string_view name, const shape_t& shape, const param_info& info) const {
        return reader_->read(prefix_ + std::string(name), shape, info, stack_);
    }
    void alias(std::string_view name, const shape_t& shape, const param_info& info) const {
        reader_->alias(prefix_ + std::string(name), shape, info, stack_);
    }
    // Whether reads only record: the caller builds nothing from what it gets.
    bool recording() const noexcept { return reader_->recording(); }
    const std::string& prefix() const noexcept { return prefix_; }
    model_stack stack() const noexcept { return stack_; }

private:
    tensor_reader* reader_;
    std::string prefix_;
    model_stack stack_;
};

// Reads from a checkpoint directory's weights.
class checkpoint_reader final : public tensor_reader {
public:
    explicit checkpoint_reader(const io::checkpoint& ck) : ck_(ck) {}
    tensor<float> read(const std::string& name, const shape_t& shape, const param_info& info, model_stack) override {
        if (info.optional && !ck_.has(name)) return {};
        return ck_.load_f32(name, shape);
    }

private:
    const io::checkpoint& ck_;
};

// Records what a read asks for; reads nothing.
class parameter_recorder final : public tensor_reader {
public:
    tensor<float> read(const std::string& name, const shape_t& shape, const param_info& info, model_stack stack) override {
        records_.push_back({name, shape, info, stack, false});
        return {};
    }
    void alias(const std::string& name, const shape_t& shape, const param_info& info, model_stack stack) override {
        records_.push_back({name, shape, info, stack, true});
    }
    bool recording() const noexcept override { return true; }
    const std::vector<param_record>& records() const noexcept { return records_; }

    // The stored tensors, each once, in the order first read: what a checkpoint must hold.
    std::vector<io::parameter_spec> parameters() const {
        std::vector<io::parameter_spec> out;
        std::unordered_set<std::string_view> seen;
        for (const auto& r : records_)
            if (!r.alias && seen.insert(r.name).second) out.push_back({r.name, r.shape, r.info.optional});
        return out;
    }

private:
    std::vector<param_record> records_;
};

}  // namespace locost::layers
