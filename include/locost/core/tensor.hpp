// Dense row-major tensors.
//
//  tensor<T, Backend>  owns storage allocated by memory<Backend> (64-byte aligned host memory for
//                      locost::cpu), shape as a small vector of extents. Move-only; clone() copies.
//  view<T>             non-owning pointer + shape: what ops and kernels take. A view does not
//                      know its backend; the op it is passed to does.
//  as_matrix(v)        an Eigen::Map of the last dimension against all the others, so a (B, L, H)
//                      activation is a (B·L, H) matrix without a copy (host views only).
#pragma once
#include <Eigen/Core>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <string>
#include <vector>

#include "../backend/backend.hpp"
#include "../config/error.hpp"
#include "aligned.hpp"
#include "index.hpp"

namespace locost {

struct shape_t : std::vector<index_t> {
    using std::vector<index_t>::vector;
    index_t numel() const {
        return std::accumulate(begin(), end(), index_t{1}, [](index_t a, index_t b) { return a * b; });
    }
    std::string str() const {
        std::string s = "(";
        for (std::size_t i = 0; i < size(); ++i) s += (i ? ", " : "") + std::to_string((*this)[i]);
        return s + (size() == 1 ? ",)" : ")");
    }
};

template <class T>
struct view {
    T* data = nullptr;
    shape_t shape;

    index_t numel() const { return shape.numel(); }
    index_t dim(std::size_t i) const { return shape[i]; }
    std::size_t rank() const { return shape.size(); }
    T& operator[](index_t i) const { return data[i]; }
    operator view<const T>() const { return {data, shape}; }
};

template <class T, class Backend>  // Backend = cpu (core/index.hpp)
class tensor {
public:
    using backend_type = Backend;
    using value_type = T;

    tensor() = default;
    explicit tensor(shape_t shape)
        : shape_(std::move(shape)), data_(memory<Backend>::template allocate<T>(static_cast<std::size_t>(shape_.numel()))) {}
    tensor(shape_t shape, T fill) requires is_host<Backend> : tensor(std::move(shape)) { std::fill_n(data(), numel(), fill); }

    static tensor zeros(shape_t shape) requires is_host<Backend> { return tensor(std::move(shape), T{}); }

    tensor(tensor&&) noexcept = default;
    tensor& operator=(tensor&&) noexcept = default;
    tensor clone() const requires is_host<Backend> {
        tensor t(shape_);
        // Written whole: its pages mapped in one call (a model load clones most weights once).
        prefault_pages(t.data(), static_cast<std::size_t>(numel()) * sizeof(T));
        if (numel()) std::memcpy(t.data(), data(), static_cast<std::size_t>(numel()) * sizeof(T));
        return t;
    }

    T* data() noexcept { return data_.get(); }
    const T* data() const noexcept { return data_.get(); }
    const shape_t& shape() const noexcept { return shape_; }
    index_t dim(std::size_t i) const { return shape_[i]; }
    std::size_t rank() const noexcept { return shape_.size(); }
    index_t numel() const { return shape_.numel(); }
    bool empty() const noexcept { return !data_; }
    T& operator[](index_t i) noexcept requires is_host<Backend> { return data_[static_cast<std::size_t>(i)]; }
    const T& operator[](index_t i) const noexcept requires is_host<Backend> { return data_[static_cast<std::size_t>(i)]; }

    view<T> v() noexcept { return {data(), shape_}; }
    view<const T> v() const noexcept { return {data(), shape_}; }
    operator view<T>() noexcept { return v(); }
    operator view<const T>() const noexcept { return v(); }

    // Same storage, new shape with the same number of elements.
    void reshape(shape_t s) {
        LOCOST_ASSERT(s.numel() == numel());
        shape_ = std::move(s);
    }

private:
    shape_t shape_;
    typename memory<Backend>::template pointer<T> data_;
};

template <class T>
using row_matrix = Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// (…, n) as a (rows, n) row-major matrix map.
template <class T>
auto as_matrix(view<T> v) {
    const index_t cols = v.rank() ? v.shape.back() : 1;
    const index_t rows = cols ? v.numel() / cols : 0;
    if constexpr (std::is_const_v<T>) return Eigen::Map<const row_matrix<T>>(v.data, rows, cols);
    else return Eigen::Map<row_matrix<T>>(v.data, rows, cols);
}

}  // namespace locost
