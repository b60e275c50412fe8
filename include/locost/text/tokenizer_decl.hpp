// text::tokenizer declared, for the public API's light headers (locost/api.hpp): the handle to
// any tokenizer and open_tokenizer(dir). text/tokenizer.hpp says which files pick which tokenizer
// and defines open_tokenizer (LOCOST_API: inline in header-only use, in the compiled library
// otherwise; config/api.hpp).
#pragma once
#include <concepts>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../config/api.hpp"
#include "conventions.hpp"
#include "special_ids.hpp"

namespace locost::text {

template <class T>
concept tokenizer_type = requires(const T& t, std::string_view s, const std::vector<int>& ids, int* extra) {
    { t.encode(s) } -> std::same_as<std::vector<int>>;
    { t.decode(ids, 0, extra) } -> std::same_as<std::string>;
    { t.vocab_size() } -> std::convertible_to<int>;
    { t.path() } -> std::convertible_to<std::string>;
    { t.specials() } -> std::same_as<special_ids>;
    { t.working_bytes(std::size_t{}) } -> std::same_as<double>;
};

class tokenizer {
public:
    // A SentencePiece model file (T5 conventions), or a directory: open_tokenizer(path).
    explicit tokenizer(const std::string& path);
    template <tokenizer_type T>
    explicit tokenizer(T t) : impl_(std::make_shared<impl<T>>(std::move(t))) {}

    // Token ids of `text` with the family's conventions (T5: `</s>` appended).
    std::vector<int> encode(std::string_view text) const { return impl_->encode(text); }
    // Text of ids; special tokens are skipped. model_vocab: the model's vocabulary size (ids past
    // the tokenizer's pieces but below it are the model's extra ids, skipped and counted in
    // *extra); an id beyond both is tokenizer.bad_id.
    std::string decode(const std::vector<int>& ids, int model_vocab = 0, int* extra = nullptr) const {
        return impl_->decode(ids, model_vocab, extra);
    }
    int vocab_size() const { return impl_->vocab_size(); }
    std::string path() const { return impl_->path(); }
    // The tokenizer's special ids (bos, eos, pad, unk, mask; -1 where it has none).
    special_ids specials() const { return impl_->specials(); }
    // About how much memory encode() takes for a text of text_bytes: what to check against a
    // budget before encoding a document of unknown size.
    double working_bytes(std::size_t text_bytes) const { return impl_->working_bytes(text_bytes); }
    // The same for this text, where what encode() holds depends on more than its size (a
    // tokenizer.json whose normalizers can lengthen the text: it is measured, a piece at a time).
    double working_bytes_of(std::string_view text) const { return impl_->working_bytes_of(text); }

private:
    struct iface {
        virtual ~iface() = default;
        virtual std::vector<int> encode(std::string_view) const = 0;
        virtual std::string decode(const std::vector<int>&, int, int*) const = 0;
        virtual int vocab_size() const = 0;
        virtual std::string path() const = 0;
        virtual special_ids specials() const = 0;
        virtual double working_bytes(std::size_t) const = 0;
        virtual double working_bytes_of(std::string_view) const = 0;
    };
    template <class T>
    struct impl final : iface {
        T t;
        explicit impl(T x) : t(std::move(x)) {}
        std::vector<int> encode(std::string_view s) const override { return t.encode(s); }
        std::string decode(const std::vector<int>& ids, int v, int* extra) const override { return t.decode(ids, v, extra); }
        int vocab_size() const override { return t.vocab_size(); }
        std::string path() const override { return t.path(); }
        special_ids specials() const override { return t.specials(); }
        double working_bytes(std::size_t n) const override { return t.working_bytes(n); }
        double working_bytes_of(std::string_view s) const override {
            if constexpr (requires { t.working_bytes_of(s); }) return t.working_bytes_of(s);
            else return t.working_bytes(s.size());
        }
    };
    std::shared_ptr<const iface> impl_;
};

// The tokenizer a directory holds, with `conventions` where its files leave them open
// (text/tokenizer.hpp). Error: tokenizer.not_found naming the directory and what it looked for.
LOCOST_API tokenizer open_tokenizer(const std::string& dir, const tokenizer_conventions& conventions = {});

}  // namespace locost::text
