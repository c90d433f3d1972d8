// Element types that tensors are stored in. Reduced-precision types really
// occupy 2 bytes, so memory figures are real.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mpb {

enum class DType : uint8_t { F32, F16, BF16, I32 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::I32: return "int32";
  }
  return "?";
}

inline bool is_float(DType t) { return t != DType::I32; }

}  // namespace mpb
