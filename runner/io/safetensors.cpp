#include "runner/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "runner/io/atomic_file.h"

// Tensors are stored little-endian; the host's bytes are copied as they are.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.cpp assumes a little-endian host"
#endif

namespace mpb {

namespace {

// The reference implementation's limit: a larger header is refused as corrupt.
constexpr uint64_t kMaxHeader = 100'000'000;

// numel of a shape, or -1 when a dimension is negative or the product overflows.
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

template <typename T>
std::vector<T> values_as(const SafetensorsTensor& t, const char* dtype) {
  if (t.dtype != dtype)
    throw SafetensorsError("tensor '" + t.name + "' is " + t.dtype + ", not " + dtype);
  std::vector<T> out(t.data.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), t.data.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},     {"F64", 8}, {"I64", 8},
      {"U64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

int64_t SafetensorsTensor::numel() const { return checked_numel(shape); }
std::vector<float> SafetensorsTensor::as_f32() const { return values_as<float>(*this, "F32"); }
std::vector<double> SafetensorsTensor::as_f64() const { return values_as<double>(*this, "F64"); }
std::vector<int32_t> SafetensorsTensor::as_i32() const { return values_as<int32_t>(*this, "I32"); }

// ---- writer ------------------------------------------------------------------

void SafetensorsWriter::add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                            const void* data, size_t bytes) {
  if (name.empty()) throw std::invalid_argument("safetensors: empty tensor name");
  if (name.rfind("__", 0) == 0) throw std::invalid_argument("safetensors: tensor name '" + name + "' is reserved");
  for (const auto& t : tensors_)
    if (t.name == name) throw std::invalid_argument("safetensors: duplicate tensor name '" + name + "'");
  const size_t elem = safetensors_dtype_size(dtype);
  if (elem == 0) throw std::invalid_argument("safetensors: unknown dtype '" + dtype + "' for '" + name + "'");
  const int64_t n = checked_numel(shape);
  if (n < 0) throw std::invalid_argument("safetensors: invalid shape " + shape_str(shape) + " for '" + name + "'");
  if (static_cast<uint64_t>(n) * elem != bytes)
    throw std::invalid_argument("safetensors: '" + name + "' " + dtype + shape_str(shape) + " needs " +
                                std::to_string(static_cast<uint64_t>(n) * elem) + " bytes, got " +
                                std::to_string(bytes));
  SafetensorsTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  t.data.resize(bytes);
  if (bytes) std::memcpy(t.data.data(), data, bytes);
  tensors_.push_back(std::move(t));
}

void SafetensorsWriter::add_f32(const std::string& name, const std::vector<int64_t>& shape,
                                const std::vector<float>& values) {
  add(name, "F32", shape, values.data(), values.size() * sizeof(float));
}
void SafetensorsWriter::add_f64(const std::string& name, const std::vector<int64_t>& shape,
                                const std::vector<double>& values) {
  add(name, "F64", shape, values.data(), values.size() * sizeof(double));
}
void SafetensorsWriter::add_i32(const std::string& name, const std::vector<int64_t>& shape,
                                const std::vector<int32_t>& values) {
  add(name, "I32", shape, values.data(), values.size() * sizeof(int32_t));
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

std::string SafetensorsWriter::serialize() const {
  // Buffer order: element size descending, stable, so each tensor is aligned
  // to its element size (the buffer itself starts at a multiple of 8).
  std::vector<const SafetensorsTensor*> order;
  for (const auto& t : tensors_) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
    return safetensors_dtype_size(a->dtype) > safetensors_dtype_size(b->dtype);
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) meta[k] = v;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const SafetensorsTensor* t : order) {
    const uint64_t end = offset + t->data.size();
    header[t->name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // invalid UTF-8 in a name or metadata
    throw std::invalid_argument(std::string("safetensors: header is not valid UTF-8: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const SafetensorsTensor* t : order) out.append(reinterpret_cast<const char*>(t->data.data()), t->data.size());
  return out;
}

void SafetensorsWriter::write(const std::string& path) const {
  std::string bytes = serialize();
  try {
    write_file_atomic(path, bytes);
  } catch (const std::runtime_error& e) {
    throw SafetensorsError(e.what());
  }
}

// ---- reader ------------------------------------------------------------------

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const SafetensorsTensor& SafetensorsFile::at(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (!t) throw SafetensorsError("no tensor '" + name + "'");
  return *t;
}

namespace {

// "<what>: not a valid safetensors file: <msg>", for every check below.
struct InvalidFile {
  const std::string& what;
  SafetensorsError operator()(const std::string& msg) const {
    return SafetensorsError(what + ": not a valid safetensors file: " + msg);
  }
};

// The 8-byte little-endian header length, checked against the file; sets `n`.
nlohmann::json read_header(const std::string& bytes, const InvalidFile& fail, uint64_t* n) {
  if (bytes.size() < 8)
    throw fail("only " + std::to_string(bytes.size()) + " bytes (the header length alone is 8)");
  *n = 0;
  for (int i = 7; i >= 0; --i) *n = (*n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (*n > kMaxHeader) throw fail("header length " + std::to_string(*n) + " exceeds the 100 MB limit");
  if (*n > bytes.size() - 8)
    throw fail("header length " + std::to_string(*n) + " runs past the end of the file (" +
               std::to_string(bytes.size()) + " bytes)");
  const std::string text = bytes.substr(8, *n);
  if (text.empty() || text[0] != '{') throw fail("the header does not start with '{'");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("the header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw fail("the header is not a JSON object");
  return header;
}

// Where a tensor's bytes lie in the buffer, and which tensor it is.
struct Span {
  uint64_t begin, end;
  size_t index;
};

// One header entry: its dtype, shape and bytes, checked against the buffer.
SafetensorsTensor read_tensor(const std::string& name, const nlohmann::json& entry, const char* buffer,
                              uint64_t buffer_size, const InvalidFile& fail, Span* span) {
  const std::string where = "tensor '" + name + "': ";
  if (!entry.is_object()) throw fail(where + "entry is not an object");
  if (!entry.contains("dtype") || !entry["dtype"].is_string()) throw fail(where + "missing string 'dtype'");
  if (!entry.contains("shape") || !entry["shape"].is_array()) throw fail(where + "missing array 'shape'");
  if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
    throw fail(where + "missing 'data_offsets' [begin, end]");
  SafetensorsTensor t;
  t.name = name;
  t.dtype = entry["dtype"].get<std::string>();
  const size_t elem = safetensors_dtype_size(t.dtype);
  if (elem == 0) throw fail(where + "unknown dtype '" + t.dtype + "'");
  for (const auto& d : entry["shape"]) {
    if (!d.is_number_unsigned()) throw fail(where + "shape entries must be non-negative integers");
    t.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  for (const auto& o : entry["data_offsets"])
    if (!o.is_number_unsigned()) throw fail(where + "data_offsets must be non-negative integers");
  const uint64_t begin = entry["data_offsets"][0].get<uint64_t>();
  const uint64_t end = entry["data_offsets"][1].get<uint64_t>();
  if (begin > end || end > buffer_size)
    throw fail(where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
               "] outside the " + std::to_string(buffer_size) + "-byte buffer");
  const int64_t numel = checked_numel(t.shape);
  if (numel < 0 || static_cast<uint64_t>(numel) * elem != end - begin)
    throw fail(where + t.dtype + shape_str(t.shape) + " needs " +
               (numel < 0 ? std::string("an impossible number of") : std::to_string(uint64_t(numel) * elem)) +
               " bytes, data_offsets give " + std::to_string(end - begin));
  t.data.assign(reinterpret_cast<const uint8_t*>(buffer + begin), reinterpret_cast<const uint8_t*>(buffer + end));
  span->begin = begin;
  span->end = end;
  return t;
}

// The tensors must tile the buffer exactly: no overlaps, no holes. Puts
// `file`'s tensors in buffer order.
void check_tiling(std::vector<Span> spans, SafetensorsFile& file, uint64_t buffer_size, const InvalidFile& fail) {
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t at = 0;
  for (const Span& s : spans) {
    if (s.begin != at)
      throw fail("tensor '" + file.tensors[s.index].name + "' starts at byte " + std::to_string(s.begin) +
                 (s.begin < at ? " inside the previous tensor" : ", leaving a hole after byte " + std::to_string(at)));
    at = s.end;
  }
  if (at != buffer_size)
    throw fail("the tensors cover " + std::to_string(at) + " of the buffer's " + std::to_string(buffer_size) +
               " bytes");
  std::vector<SafetensorsTensor> ordered;
  ordered.reserve(spans.size());
  for (const Span& s : spans) ordered.push_back(std::move(file.tensors[s.index]));
  file.tensors = std::move(ordered);
}

}  // namespace

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& what) {
  const InvalidFile fail{what};
  uint64_t n = 0;
  const nlohmann::json header = read_header(bytes, fail, &n);
  const uint64_t buffer_size = bytes.size() - 8 - n;
  const char* buffer = bytes.data() + 8 + n;
  SafetensorsFile file;
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw fail("__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw fail("__metadata__ value of '" + k + "' is not a string");
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    Span span{0, 0, file.tensors.size()};
    file.tensors.push_back(read_tensor(name, entry, buffer, buffer_size, fail, &span));
    spans.push_back(span);
  }
  check_tiling(std::move(spans), file, buffer_size, fail);
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::string bytes;
  try {
    bytes = read_file(path);
  } catch (const std::runtime_error& e) {
    throw SafetensorsError(e.what());
  }
  return parse_safetensors(bytes, path);
}

}  // namespace mpb
