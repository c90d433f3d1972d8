// The safetensors file format (Hugging Face; what PyTorch, JAX and llm.c-style
// tools exchange weights in), written and read without the Rust library:
//
//   8 bytes   N, the header length, little-endian u64
//   N bytes   UTF-8 JSON: {"__metadata__": {str: str, ...},
//                          "name": {"dtype": "F32", "shape": [2, 3],
//                                   "data_offsets": [begin, end]}, ...}
//             padded with spaces so that the buffer starts at a multiple of 8
//   the rest  the byte buffer; offsets are relative to its start, tensors are
//             little-endian, row-major, and cover the buffer without holes
//
// The writer orders the buffer by element size (largest first, then in the
// order tensors were added), as the reference implementation does, so every
// tensor starts at a multiple of its element size. The reader validates
// everything the specification requires and throws SafetensorsError naming
// the file and what is wrong.
//
// Used by the reference export (runner/commands/reference_export.h); the Python side
// has its own small reader/writer (scripts/torch_reference.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace mpb {

class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bytes per element of a safetensors dtype name ("F64", "F32", "F16", "BF16",
// "I64", "I32", "I16", "I8", "U8", "BOOL", ...); 0 for an unknown name.
size_t safetensors_dtype_size(const std::string& dtype);

struct SafetensorsTensor {
  std::string name;
  std::string dtype;           // "F32", "I32", ...
  std::vector<int64_t> shape;  // [] is a scalar (one element)
  std::vector<uint8_t> data;   // numel * element size bytes, little-endian

  int64_t numel() const;
  // The values; throws SafetensorsError unless dtype is F32 (resp. F64, I32).
  std::vector<float> as_f32() const;
  std::vector<double> as_f64() const;
  std::vector<int32_t> as_i32() const;
};

class SafetensorsWriter {
 public:
  // Adds a tensor; `bytes` must be numel(shape) * element size. Throws
  // std::invalid_argument for a duplicate or empty name, a name starting with
  // "__" (reserved), an unknown dtype or a size mismatch.
  void add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
           const void* data, size_t bytes);
  void add_f32(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& values);
  void add_f64(const std::string& name, const std::vector<int64_t>& shape, const std::vector<double>& values);
  void add_i32(const std::string& name, const std::vector<int64_t>& shape, const std::vector<int32_t>& values);
  void set_metadata(const std::string& key, const std::string& value);

  size_t size() const { return tensors_.size(); }
  // The whole file's bytes.
  std::string serialize() const;
  // Writes the file (through a temporary file and a rename); throws
  // SafetensorsError when it can't be written.
  void write(const std::string& path) const;

 private:
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsTensor> tensors;  // in buffer order

  // nullptr when absent.
  const SafetensorsTensor* find(const std::string& name) const;
  // Throws SafetensorsError when absent.
  const SafetensorsTensor& at(const std::string& name) const;
};

// Parses a whole file's bytes; `what` (the path) prefixes error messages.
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& what = "safetensors data");
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace mpb
