// A non-owning view of device memory: pointer, element type, shape (row-major,
// up to 4 dimensions). Model code passes these to Device ops and never
// dereferences `data` itself; only the backend that owns the memory does.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "core/dtype.h"

namespace mpb {

struct Shape {
  std::array<int64_t, 4> dims{0, 0, 0, 0};
  int ndim = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    if (d.size() > 4) throw std::invalid_argument("Shape: at most 4 dimensions");
    for (int64_t v : d) dims[ndim++] = v;
  }
  int64_t numel() const {
    if (ndim == 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= dims[i];
    return n;
  }
  int64_t operator[](int i) const { return dims[i]; }
  // The shape seen as a matrix: all leading dimensions folded into rows.
  int64_t rows() const { return ndim == 0 ? 0 : numel() / dims[ndim - 1]; }
  int64_t cols() const { return ndim == 0 ? 0 : dims[ndim - 1]; }
  // Only the first ndim entries are the shape; the rest are not compared.
  bool operator==(const Shape& o) const {
    if (ndim != o.ndim) return false;
    for (int i = 0; i < ndim; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) s += (i ? "," : "") + std::to_string(dims[i]);
    return s + "]";
  }
};

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Shape shape;

  Tensor() = default;
  Tensor(void* d, DType t, Shape s) : data(d), dtype(t), shape(s) {}

  int64_t numel() const { return shape.numel(); }
  int64_t rows() const { return shape.rows(); }
  int64_t cols() const { return shape.cols(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool empty() const { return data == nullptr; }

  // The same memory with another shape of equal element count.
  Tensor reshaped(Shape s) const {
    if (s.numel() != numel()) throw std::invalid_argument("Tensor::reshaped: " + shape.str() + " -> " + s.str());
    return Tensor(data, dtype, s);
  }
  // Rows [begin, begin+count) of the matrix view (contiguous, so still a plain view).
  Tensor row_slice(int64_t begin, int64_t count) const {
    if (begin < 0 || count < 0 || begin + count > rows()) throw std::out_of_range("Tensor::row_slice");
    char* p = static_cast<char*>(data) + static_cast<size_t>(begin * cols()) * dtype_size(dtype);
    return Tensor(p, dtype, Shape{count, cols()});
  }
  // Elements [offset, offset+count) as a 1-D view.
  Tensor flat_slice(int64_t offset, int64_t count) const {
    if (offset < 0 || count < 0 || offset + count > numel()) throw std::out_of_range("Tensor::flat_slice");
    char* p = static_cast<char*>(data) + static_cast<size_t>(offset) * dtype_size(dtype);
    return Tensor(p, dtype, Shape{count});
  }
};

}  // namespace mpb
