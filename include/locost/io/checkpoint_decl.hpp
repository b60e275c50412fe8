// io::checkpoint declared, for the public API's light headers (locost/api.hpp): what a program
// that opens a checkpoint and hands it to models::load_model() needs to parse. io/checkpoint.hpp
// says what a checkpoint directory holds and how names resolve, and defines these members
// (LOCOST_API: inline in header-only use, in the compiled library otherwise; config/api.hpp).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "../config/api.hpp"
#include "../core/index.hpp"
#include "cache_location.hpp"
#include "generation_config.hpp"

namespace locost::io {

using json = nlohmann::json;
struct tensor_record;      // io/tensor_record.hpp
struct validation_report;  // io/checkpoint.hpp
struct parameter_spec;     // io/checkpoint.hpp

// A model checkpoint directory: config.json plus the weights (safetensors, sharded safetensors or
// pytorch_model.bin), mapped, and generation_config.json when there is one. Copies share one
// opened directory. Errors of open(): checkpoint.*, config.*, io.*, safetensors.*, pytorch.*.
class checkpoint {
public:
    static constexpr const char* file_config = "config.json";
    static constexpr const char* file_safetensors = "model.safetensors";
    static constexpr const char* file_index = "model.safetensors.index.json";
    static constexpr const char* file_pytorch = "pytorch_model.bin";

    // No directory: no tensors, an empty config.
    checkpoint();
    // Opens DIR with DIR/config.json. Every file is read from inside DIR (io/file_access.hpp).
    // DIR may be a repository id, `org/name[@revision]`, of the Hugging Face cache (hub_cache.hpp):
    // `cache`'s, else the environment's.
    static checkpoint open(const std::string& dir_or_name, const cache_location& cache = {});
    // Opens DIR's weights with the configuration at `config_path` (e.g. a variant config; the
    // user's choice, so it may lie anywhere).
    static checkpoint open(const std::string& dir_or_name, const std::string& config_path, const cache_location& cache = {});

    // config.json as a JSON object (a family parses it: models::read_config) and its path.
    const json& config_json() const noexcept;
    const std::string& config_path() const noexcept;
    // tie_word_embeddings of config.json (absent: true, the PretrainedConfig default).
    bool tie_word_embeddings() const noexcept;
    // generation_config.json, when the directory has one.
    const std::optional<generation_config>& generation() const noexcept;
    const std::string& dir() const noexcept;
    // The cache repository ids were looked up in when it was opened; what the checkpoint names in
    // turn (a SLED backbone, its tokenizer) is looked up there too.
    const cache_location& cache() const noexcept;
    // model.safetensors, model.safetensors.index.json or pytorch_model.bin.
    const std::string& weights_path() const noexcept;
    // Every stored tensor (tied copies included), as the weights file(s) hold them.
    const std::vector<tensor_record>& records() const noexcept;
    // Whether `name` resolves to a stored tensor (tied names included).
    bool has(std::string_view name) const;
    // The record `name` resolves to. Error: checkpoint.missing_tensor.
    const tensor_record& record(std::string_view name) const;
    // `name` as float32, after checking its shape and dtype. Errors: checkpoint.missing_tensor,
    // checkpoint.shape_mismatch, checkpoint.unsupported_dtype, checkpoint.non_finite.
    tensor<float> load_f32(const std::string& name, const shape_t& expected) const;
    // The stored tensors against `expected` (a family's parameter list).
    validation_report validate(const std::vector<parameter_spec>& expected) const;
    // validate(), throwing checkpoint.invalid when tensors are missing, misshapen or not float.
    void require_valid(const std::vector<parameter_spec>& expected) const;

private:
    struct contents;  // io/checkpoint.hpp
    explicit checkpoint(contents&& c);
    std::shared_ptr<const contents> c_;
};

}  // namespace locost::io
