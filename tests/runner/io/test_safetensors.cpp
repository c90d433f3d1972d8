// The safetensors writer and reader (runner/io/safetensors.h): round trips, the
// byte layout the specification fixes (header length, JSON, padding, offsets,
// alignment), and clear errors for files that break it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/io/safetensors.h"

namespace mpb {
namespace {

uint64_t header_len(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  return n;
}

std::string with_header(const std::string& json, const std::string& buffer) {
  std::string out;
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + json + buffer;
}

// The error message of parsing `bytes`, or "" when it parses.
std::string parse_error(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "bad.safetensors");
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "";
}

SafetensorsWriter sample_writer() {
  SafetensorsWriter w;
  w.set_metadata("format", "test");
  w.add_i32("labels", {3}, {1, -1, 7});  // 12 bytes first: the writer still aligns the F64 below
  w.add_f32("layers.0.weight", {2, 3}, {1.f, -2.f, 3.5f, 0.f, -0.f, 1e-30f});
  w.add_f64("loss", {}, {2.0794415416798357});
  const uint16_t half[2] = {0x3c00, 0xc000};  // 1.0, -2.0
  w.add("h", "F16", {2}, half, sizeof half);
  w.add_f32("empty", {0, 4}, {});
  return w;
}

TEST(Safetensors, RoundTripKeepsNamesDtypesShapesValuesAndMetadata) {
  const SafetensorsFile f = parse_safetensors(sample_writer().serialize());
  EXPECT_EQ(f.metadata.at("format"), "test");
  ASSERT_EQ(f.tensors.size(), 5u);
  const auto& w = f.at("layers.0.weight");
  EXPECT_EQ(w.dtype, "F32");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
  const std::vector<float> v = w.as_f32();
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[2], 3.5f);
  EXPECT_TRUE(std::signbit(v[4]));
  EXPECT_EQ(v[5], 1e-30f);
  EXPECT_EQ(f.at("labels").as_i32(), (std::vector<int32_t>{1, -1, 7}));
  const auto& loss = f.at("loss");
  EXPECT_TRUE(loss.shape.empty());
  EXPECT_EQ(loss.numel(), 1);
  EXPECT_EQ(loss.as_f64().at(0), 2.0794415416798357);
  const auto& h = f.at("h");
  EXPECT_EQ(h.dtype, "F16");
  ASSERT_EQ(h.data.size(), 4u);
  EXPECT_EQ(h.data[1], 0x3c);
  EXPECT_EQ(f.at("empty").numel(), 0);
  EXPECT_TRUE(f.at("empty").data.empty());
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_THROW(f.at("missing"), SafetensorsError);
  EXPECT_THROW(f.at("labels").as_f32(), SafetensorsError);  // wrong dtype
}

TEST(Safetensors, RoundTripThroughAFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("mpb_st_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".safetensors")).string();
  sample_writer().write(path);
  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.at("labels").as_i32(), (std::vector<int32_t>{1, -1, 7}));
  std::remove(path.c_str());
  // No temp file of the write left beside it (named NAME.<hex>.tmp: runner/io/atomic_file.cpp).
  const std::string base = std::filesystem::path(path).filename().string();
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    const std::string n = e.path().filename().string();
    EXPECT_FALSE(n.rfind(base + ".", 0) == 0 && n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) << n;
  }
}

TEST(Safetensors, HeaderLayoutFollowsTheSpecification) {
  const std::string bytes = sample_writer().serialize();
  const uint64_t n = header_len(bytes);
  ASSERT_GE(bytes.size(), 8 + n);
  EXPECT_EQ((8 + n) % 8, 0u) << "the buffer must start at a multiple of 8";
  const std::string text = bytes.substr(8, n);
  EXPECT_EQ(text.front(), '{');
  const size_t close = text.find_last_of('}');
  ASSERT_NE(close, std::string::npos);
  EXPECT_EQ(text.find_first_not_of(' ', close + 1), std::string::npos) << "padding must be spaces";
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j.at("__metadata__").at("format"), "test");
  const auto& w = j.at("layers.0.weight");
  EXPECT_EQ(w.at("dtype"), "F32");
  EXPECT_EQ(w.at("shape"), nlohmann::json::array({2, 3}));
  EXPECT_EQ(j.at("loss").at("shape"), nlohmann::json::array());
  // The F32 tensor's bytes are where data_offsets say, relative to the buffer.
  const uint64_t begin = w.at("data_offsets")[0].get<uint64_t>();
  const uint64_t end = w.at("data_offsets")[1].get<uint64_t>();
  EXPECT_EQ(end - begin, 24u);
  float first = 0.f;
  std::memcpy(&first, bytes.data() + 8 + n + begin, 4);
  EXPECT_EQ(first, 1.f);
  // The offsets tile the buffer.
  uint64_t total = 0;
  for (const auto& [name, e] : j.items())
    if (name != "__metadata__") total += e.at("data_offsets")[1].get<uint64_t>() - e.at("data_offsets")[0].get<uint64_t>();
  EXPECT_EQ(8 + n + total, bytes.size());
}

TEST(Safetensors, EveryTensorIsAlignedToItsElementSize) {
  const std::string bytes = sample_writer().serialize();
  const auto j = nlohmann::json::parse(bytes.substr(8, header_len(bytes)));
  for (const auto& [name, e] : j.items()) {
    if (name == "__metadata__") continue;
    const size_t elem = safetensors_dtype_size(e.at("dtype").get<std::string>());
    ASSERT_GT(elem, 0u);
    EXPECT_EQ(e.at("data_offsets")[0].get<uint64_t>() % elem, 0u) << name;
  }
}

TEST(Safetensors, EmptyFileHasAnEmptyHeader) {
  const std::string bytes = SafetensorsWriter().serialize();
  EXPECT_EQ(bytes.size(), 16u);  // "{}" padded to 8
  const SafetensorsFile f = parse_safetensors(bytes);
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());
}

TEST(Safetensors, WriterRejectsInvalidTensors) {
  SafetensorsWriter w;
  w.add_f32("a", {2}, {1.f, 2.f});
  EXPECT_THROW(w.add_f32("a", {1}, {1.f}), std::invalid_argument);         // duplicate
  EXPECT_THROW(w.add_f32("b", {3}, {1.f, 2.f}), std::invalid_argument);    // size mismatch
  EXPECT_THROW(w.add_f32("__metadata__", {1}, {1.f}), std::invalid_argument);
  EXPECT_THROW(w.add_f32("", {1}, {1.f}), std::invalid_argument);
  const float x = 0.f;
  EXPECT_THROW(w.add("c", "F31", {1}, &x, 4), std::invalid_argument);     // unknown dtype
  EXPECT_THROW(w.add_f32("d", {-1}, {}), std::invalid_argument);
}

TEST(Safetensors, BadFilesGiveClearErrors) {
  auto expect_error = [](const std::string& bytes, const std::string& needle) {
    const std::string msg = parse_error(bytes);
    EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "' in: " << msg;
  };
  const std::string good = sample_writer().serialize();
  expect_error("", "only 0 bytes");
  expect_error(good.substr(0, 5), "only 5 bytes");
  expect_error(good.substr(0, 40), "runs past the end of the file");
  expect_error(with_header("{\"a\": 1", ""), "not valid JSON");
  expect_error(with_header("[1,2]   ", ""), "does not start with '{'");
  std::string huge(8, '\xff');
  expect_error(huge + "{}", "exceeds the 100 MB limit");
  expect_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(4, '\0')),
               "outside the 4-byte buffer");
  expect_error(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
               "needs 12 bytes");
  expect_error(with_header(R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')),
               "unknown dtype 'Q7'");
  expect_error(with_header(R"({"a":{"dtype":"F32","shape":[2]}})", std::string(8, '\0')), "data_offsets");
  expect_error(with_header(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, '\0')),
               "non-negative");
  // A hole, an overlap, and bytes that no tensor covers.
  expect_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0')),
               "leaving a hole");
  expect_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           std::string(8, '\0')),
               "inside the previous tensor");
  expect_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(8, '\0')),
               "cover 4 of the buffer's 8 bytes");
  expect_error(with_header(R"({"__metadata__":{"k":3}})", ""), "not a string");
  try {
    read_safetensors("/nonexistent/dir/x.safetensors");
    ADD_FAILURE() << "reading a missing file must throw";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.safetensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace mpb
