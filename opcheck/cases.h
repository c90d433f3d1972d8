// Internal to the op-check library: what the case files (cases_*.cpp) share.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "opcheck/opcheck.h"
#include "opcheck/reference.h"

namespace mpb::opcheck {

void add_elementwise_cases(std::vector<OpCase>& v);  // fill cast scale add_bias add activation_* bias_grad dropout
void add_reduction_cases(std::vector<OpCase>& v);    // softmax_xent_* count_correct stats exponent_histogram
void add_layernorm_cases(std::vector<OpCase>& v);    // layernorm_* residual_layernorm_forward head shuffles
void add_attention_cases(std::vector<OpCase>& v);    // masked_softmax_forward softmax_backward attention_*
void add_embedding_cases(std::vector<OpCase>& v);    // embedding_forward/backward
void add_label_position_cases(std::vector<OpCase>& v);  // label_positions + the sparse head's gather/scatter
void add_optimizer_cases(std::vector<OpCase>& v);    // adamw_step sgd_step lamb_step
void add_decide_step_cases(std::vector<OpCase>& v);  // decide_step + the decided optimizer ops
void add_fp8_scale_cases(std::vector<OpCase>& v);    // fp8_update_scales
void add_gemm_cases(std::vector<OpCase>& v);         // gemm: modes, epilogues, batches, backward epilogues

inline constexpr DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

// The operands' dtype for a GEMM compute mode (fp32 for F32 and TF32).
inline DType operand_type(GemmCompute c) {
  return c == GemmCompute::F16 ? DType::F16 : (c == GemmCompute::BF16 ? DType::BF16 : DType::F32);
}

// "[m x n x k, transposes, mode, C's dtype" (a GEMM run's label, unclosed).
inline std::string gemm_label(int64_t m, int64_t n, int64_t k, bool ta, bool tb, GemmCompute c, DType c_dtype) {
  return "[" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (ta ? " At" : " A") +
         (tb ? "Bt " : "B ") + gemm_compute_name(c) + " C " + short_name(c_dtype);
}

// "a+b->c" style dtype labels.
inline std::string dt(DType t) { return short_name(t); }

// A case whose instance is I(args...), made when the case runs.
template <class I, class... Args>
OpCase make_case(std::string op, std::string variant, std::string dtype, Size size, std::string tolerance,
                 bool bitwise_vs_cpu, Args... args) {
  OpCase c;
  c.op = std::move(op);
  c.variant = std::move(variant);
  c.dtype = std::move(dtype);
  c.size = size;
  c.tolerance = std::move(tolerance);
  c.bitwise_vs_cpu = bitwise_vs_cpu;
  c.make = [args...]() -> std::unique_ptr<Instance> { return std::make_unique<I>(args...); };
  return c;
}

// Seeds: a case's inputs depend only on its own name and parameters (ints,
// enums, bools), so a case gives the same inputs whatever else runs.
template <class... Parts>
uint64_t seed_of(const std::string& s, Parts... parts) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the name, then the parts
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  ((h = (h ^ static_cast<uint64_t>(parts)) * 1099511628211ull), ...);
  return h;
}

}  // namespace mpb::opcheck
