// train/lamb_tensors.h: which element ranges get one LAMB trust ratio each.
// BERT's packed QKV (ParamInfo::packed_layers 3) is three tensors by default
// (optimizer.lamb_qkv split, NVIDIA's recipe's separate q, k, v Linears) and
// one under packed; every other tensor is one, in order, empty ones skipped.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "models/param_store.h"
#include "train/cell_factory.h"
#include "train/lamb_tensors.h"
#include "tests/models/model_test_helpers.h"

namespace mpb {
namespace {

// A layer's table as BERT lays it out: qkv weight [3C, C] and bias [3C]
// (3 layers each), then the output dense weight, an empty tensor, a gain.
std::vector<ParamInfo> table(int64_t C) {
  std::vector<ParamInfo> t;
  int64_t at = 0;
  auto add = [&](const char* name, Shape s, ParamRole role, int packed) {
    t.push_back({name, s, at, role, packed});
    at += s.numel();
  };
  add("qkv.weight", Shape{3 * C, C}, ParamRole::Weight, 3);
  add("qkv.bias", Shape{3 * C}, ParamRole::Bias, 3);
  add("dense.weight", Shape{C, C}, ParamRole::Weight, 1);
  add("empty", Shape{}, ParamRole::Bias, 1);
  add("ln.weight", Shape{C}, ParamRole::Norm, 1);
  return t;
}

void expect_range(const LambTensor& t, int64_t begin, int64_t end, bool decayed) {
  EXPECT_EQ(t.begin, begin);
  EXPECT_EQ(t.end, end);
  EXPECT_EQ(t.decayed, decayed);
}

TEST(LambTensors, SplitCutsPackedTensorsIntoTheirLayers) {
  const int64_t C = 4;
  const std::vector<LambTensor> r = lamb_tensors(table(C), {true, false, true, false, false}, LambQkv::Split);
  ASSERT_EQ(r.size(), 8u);
  expect_range(r[0], 0, 16, true);    // q rows [0, C)
  expect_range(r[1], 16, 32, true);   // k rows [C, 2C)
  expect_range(r[2], 32, 48, true);   // v rows [2C, 3C)
  expect_range(r[3], 48, 52, false);  // q bias
  expect_range(r[4], 52, 56, false);  // k bias
  expect_range(r[5], 56, 60, false);  // v bias
  expect_range(r[6], 60, 76, true);   // dense, whole
  expect_range(r[7], 76, 80, false);  // the gain; the empty tensor has no range
}

TEST(LambTensors, PackedKeepsEachTensorWhole) {
  const std::vector<LambTensor> r = lamb_tensors(table(4), {true, false, true, false, false}, LambQkv::Packed);
  ASSERT_EQ(r.size(), 4u);
  expect_range(r[0], 0, 48, true);
  expect_range(r[1], 48, 60, false);
  expect_range(r[2], 60, 76, true);
  expect_range(r[3], 76, 80, false);
}

TEST(LambTensors, RefusesMismatchedDecayFlags) {
  EXPECT_THROW(lamb_tensors(table(4), {true, false}, LambQkv::Split), std::invalid_argument);
}

// The model says which tensors pack layers: in BERT exactly every layer's
// attention.qkv weight and bias, 3 each; ParamStore refuses a count that
// does not divide the first dimension.
TEST(LambTensors, BertMarksOnlyItsQkvTensorsAsThreeLayers) {
  CellConfig c = model_test::tiny_bert_cell();
  c.batch_size = 4;
  auto dev = make_cpu_device();
  auto model = build_model(*dev, c, 1);
  int packed = 0;
  for (const ParamInfo& p : model->param_info()) {
    const bool qkv = p.name.find("attention.qkv.") != std::string::npos;
    EXPECT_EQ(p.packed_layers, qkv ? 3 : 1) << p.name;
    packed += qkv;
  }
  EXPECT_EQ(packed, 2 * c.model.layers);
  ParamStore store(*dev, PrecisionPolicy{});
  EXPECT_THROW(store.add("odd", Shape{4, 3}, ParamRole::Weight, 3), std::logic_error);
}

}  // namespace
}  // namespace mpb
