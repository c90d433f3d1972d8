// The rules every public Device op checks with (core/device_checks*.cpp):
// messages "<op>: <argument> <what is wrong>", with dtypes and shapes
// ("float16 [4,8]"). They only compare numbers: they never read tensor data
// and never build a string unless they fail. Internal to those files.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/tensor.h"

namespace mpb::device_rules {

inline std::string describe(const Tensor& t) { return std::string(dtype_name(t.dtype)) + " " + t.shape.str(); }
inline std::string num(int64_t v) { return std::to_string(v); }
inline std::string num(double v) { return std::to_string(v); }

[[noreturn]] inline void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string(op) + ": " + what);
}

// A tensor with elements must have data.
inline void need_data(const char* op, const char* name, const Tensor& t) {
  if (t.numel() > 0 && t.data == nullptr) fail(op, std::string(name) + " " + describe(t) + " has null data");
}

inline void need_float(const char* op, const char* name, const Tensor& t) {
  if (!is_float(t.dtype)) fail(op, std::string(name) + " must be a float tensor, got " + describe(t));
  need_data(op, name, t);
}

// need_float for each (name, tensor) of an op's float operands, in order.
inline void need_floats(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> operands) {
  for (const auto& [name, t] : operands) need_float(op, name, *t);
}

inline void need_dtype(const char* op, const char* name, const Tensor& t, DType want) {
  if (t.dtype != want) fail(op, std::string(name) + " must be " + dtype_name(want) + ", got " + describe(t));
  need_data(op, name, t);
}

// numel(t) == n; `what` says where n comes from ("[cols] of y").
inline void need_numel(const char* op, const char* name, const Tensor& t, int64_t n, const std::string& what) {
  if (t.numel() != n)
    fail(op, std::string(name) + " must hold " + num(n) + " elements (" + what + "), got " + describe(t));
}

inline void need_same_numel(const char* op, const char* name, const Tensor& t, const char* ref_name, const Tensor& ref) {
  if (t.numel() != ref.numel())
    fail(op, "element counts differ: " + std::string(name) + " " + describe(t) + ", " + ref_name + " " +
                 describe(ref));
}

inline void need_shape(const char* op, const char* name, const Tensor& t, const char* ref_name, const Tensor& ref) {
  if (t.shape != ref.shape)
    fail(op, std::string(name) + " must have " + ref_name + "'s shape " + ref.shape.str() + ", got " + describe(t));
}

// Two tensors with elements must not share their first element.
inline void need_distinct(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b,
                   const char* why) {
  if (a.numel() > 0 && b.numel() > 0 && a.data == b.data)
    fail(op, std::string(a_name) + " must not share " + b_name + "'s memory (" + why + ")");
}

}  // namespace mpb::device_rules
