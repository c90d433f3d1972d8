// Precision policies: presets, apex opt levels, JMP strings, and errors.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/precision.h"

namespace mpb {
namespace {

TEST(Precision, Presets) {
  PrecisionPolicy p = resolve_policy("fp32");
  EXPECT_EQ(p.compute, DType::F32);
  EXPECT_EQ(p.gemm, GemmCompute::F32);
  p = resolve_policy("tf32");
  EXPECT_EQ(p.compute, DType::F32);
  EXPECT_EQ(p.gemm, GemmCompute::TF32);
  p = resolve_policy("amp_fp16");  // autocast: fp32 weights, half GEMMs and activations
  EXPECT_EQ(p.param, DType::F32);
  EXPECT_TRUE(p.master_weights);
  EXPECT_EQ(p.compute, DType::F16);
  EXPECT_EQ(p.gemm, GemmCompute::F16);
  EXPECT_EQ(p.grad(), DType::F32);
  p = resolve_policy("amp_bf16");
  EXPECT_EQ(p.compute, DType::BF16);
  EXPECT_EQ(p.gemm, GemmCompute::BF16);
}

TEST(Precision, Fp8IsAmpBf16WithFp8LinearGemms) {
  const PrecisionPolicy p = resolve_policy("fp8");
  EXPECT_TRUE(p.fp8);
  EXPECT_EQ(p.param, DType::F32);  // fp32 master weights
  EXPECT_TRUE(p.master_weights);
  EXPECT_EQ(p.compute, DType::BF16);  // bf16 elsewhere
  EXPECT_EQ(p.gemm, GemmCompute::BF16);
  EXPECT_NE(p.describe().find("fp8"), std::string::npos);
  EXPECT_FALSE(resolve_policy("amp_bf16").fp8);
}

TEST(Precision, ApexOptLevels) {
  EXPECT_EQ(resolve_policy("O0").compute, DType::F32);
  PrecisionPolicy o1 = resolve_policy("O1");
  EXPECT_EQ(o1.param, DType::F32);
  EXPECT_EQ(o1.compute, DType::F16);
  PrecisionPolicy o2 = resolve_policy("O2");  // half model + fp32 master copy
  EXPECT_EQ(o2.param, DType::F16);
  EXPECT_TRUE(o2.master_weights);
  EXPECT_EQ(o2.grad(), DType::F16);
  PrecisionPolicy o3 = resolve_policy("O3");  // pure half
  EXPECT_EQ(o3.param, DType::F16);
  EXPECT_FALSE(o3.master_weights);
}

TEST(Precision, JmpStrings) {
  PrecisionPolicy p = resolve_policy("params=float32,compute=float16,output=float32");
  EXPECT_EQ(p.param, DType::F32);
  EXPECT_EQ(p.compute, DType::F16);
  EXPECT_EQ(p.output, DType::F32);
  EXPECT_TRUE(p.master_weights);
  p = resolve_policy("p=f32, c=bf16, o=bf16");
  EXPECT_EQ(p.compute, DType::BF16);
  EXPECT_EQ(p.output, DType::BF16);
  p = resolve_policy("c=half");  // params default to float32, output to compute
  EXPECT_EQ(p.param, DType::F32);
  EXPECT_EQ(p.output, DType::F16);
  p = resolve_policy("bfloat16");  // a bare dtype sets all three; half params mean no master
  EXPECT_EQ(p.param, DType::BF16);
  EXPECT_EQ(p.compute, DType::BF16);
  EXPECT_FALSE(p.master_weights);
  EXPECT_EQ(resolve_policy("full").compute, DType::F32);
  EXPECT_EQ(resolve_policy("half").compute, DType::F16);
}

void expect_error(const std::string& text, const std::string& fragment) {
  try {
    resolve_policy(text);
    ADD_FAILURE() << "'" << text << "' was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Precision, NamedPrecisionsAreTheOneListInDisplayOrder) {
  // The order reports sort by (manifest vocabulary.precisions); fp8 in its place.
  const std::vector<std::string> expected = {"fp32", "tf32", "amp_bf16", "amp_fp16", "fp8",
                                             "O0",   "O1",   "O2",       "O3"};
  EXPECT_EQ(named_precisions(), expected);
  for (const auto& name : named_precisions()) {
    EXPECT_EQ(resolve_policy(name).name, name);  // every listed name resolves to itself
  }
  // The "expected ..." message lists every name from the same list.
  try {
    resolve_policy("fp33");
    ADD_FAILURE() << "fp33 resolved";
  } catch (const std::invalid_argument& e) {
    for (const auto& name : named_precisions())
      EXPECT_NE(std::string(e.what()).find(name + ", "), std::string::npos) << name;
  }
}

TEST(Precision, ErrorsSayWhatIsWrong) {
  expect_error("fp33", "unknown precision 'fp33'");
  expect_error("O4", "unknown precision");
  expect_error("params=float32,compute=float8", "unknown dtype 'float8'");
  expect_error("params=float32,weights=float16", "unknown key 'weights'");
  expect_error("params=float32,params=float16", "given twice");
  expect_error("params=float32,compute", "not key=dtype");
  // Policies that make no sense:
  expect_error("params=bfloat16,compute=float16", "mixes float16 and bfloat16");
  expect_error("params=float16,compute=float32", "saves no compute");
}

}  // namespace
}  // namespace mpb
