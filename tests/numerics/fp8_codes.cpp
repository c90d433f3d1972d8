// core/fp8.h's conversions as files, for tests/numerics/test_fp8_ml_dtypes.py
// (which compares them with ml_dtypes; C++ cannot load that Python library).
//   fp8_codes encode IN OUT: IN is raw little-endian float32; OUT gets 4 bytes
//     per input: E4M3 non-saturating, E4M3 saturating, E5M2 non-saturating,
//     E5M2 saturating.
//   fp8_codes decode OUT: OUT gets 512 float32: the 256 E4M3 codes decoded,
//     then the 256 E5M2 codes.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/fp8.h"

namespace {

int usage() {
  std::fprintf(stderr, "usage: fp8_codes encode IN.f32 OUT.u8 | fp8_codes decode OUT.f32\n");
  return 2;
}

bool write_all(const char* path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "decode") == 0) {
    std::vector<float> out;
    for (mpb::Fp8Format f : {mpb::Fp8Format::E4M3, mpb::Fp8Format::E5M2})
      for (int c = 0; c < 256; ++c) out.push_back(mpb::fp8_bits_to_float(static_cast<uint8_t>(c), f));
    return write_all(argv[2], out.data(), out.size() * sizeof(float)) ? 0 : 1;
  }
  if (argc == 4 && std::strcmp(argv[1], "encode") == 0) {
    std::ifstream in(argv[2], std::ios::binary | std::ios::ate);
    const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
    std::vector<char> raw(size > 0 ? static_cast<size_t>(size) : 0);
    in.seekg(0);
    if (size < 0 || !in.read(raw.data(), static_cast<std::streamsize>(raw.size())) || raw.size() % 4 != 0) {
      std::fprintf(stderr, "fp8_codes: %s: cannot read, or not a whole number of float32\n", argv[2]);
      return 1;
    }
    std::vector<uint8_t> out;
    out.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); i += 4) {
      float x;
      std::memcpy(&x, raw.data() + i, 4);
      out.push_back(mpb::float_to_e4m3_bits(x, false));
      out.push_back(mpb::float_to_e4m3_bits(x, true));
      out.push_back(mpb::float_to_e5m2_bits(x, false));
      out.push_back(mpb::float_to_e5m2_bits(x, true));
    }
    return write_all(argv[3], out.data(), out.size()) ? 0 : 1;
  }
  return usage();
}
