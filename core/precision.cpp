#include "core/precision.h"

#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/strings.h"

namespace mpb {

namespace {

// dtype names JMP accepts, plus half/full.
bool parse_dtype(const std::string& s, DType& out) {
  static const std::map<std::string, DType> names = {
      {"float32", DType::F32}, {"f32", DType::F32}, {"fp32", DType::F32}, {"full", DType::F32},
      {"float16", DType::F16}, {"f16", DType::F16}, {"fp16", DType::F16}, {"half", DType::F16},
      {"bfloat16", DType::BF16}, {"bf16", DType::BF16}};
  auto it = names.find(s);
  if (it == names.end()) return false;
  out = it->second;
  return true;
}

GemmCompute gemm_for(DType compute) {
  switch (compute) {
    case DType::F16: return GemmCompute::F16;
    case DType::BF16: return GemmCompute::BF16;
    default: return GemmCompute::F32;
  }
}

PrecisionPolicy make(const std::string& name, DType param, bool master, DType compute, DType output) {
  PrecisionPolicy p;
  p.name = name;
  p.param = param;
  p.master_weights = master;
  p.compute = compute;
  p.output = output;
  p.gemm = gemm_for(compute);
  return p;
}

std::string accepted_forms();  // below the table of named precisions

// Policies that can run but make no sense are errors, not surprises later.
void check_sensible(const PrecisionPolicy& p, const std::string& text) {
  auto is_half = [](DType t) { return t == DType::F16 || t == DType::BF16; };
  std::vector<DType> halves;
  for (DType t : {p.param, p.compute, p.output})
    if (is_half(t)) halves.push_back(t);
  for (DType t : halves)
    if (t != halves.front())
      throw std::invalid_argument("precision '" + text +
                                  "' mixes float16 and bfloat16; casting between them loses range or precision");
  if (is_half(p.param) && p.compute == DType::F32)
    throw std::invalid_argument("precision '" + text +
                                "' stores parameters in half but computes in float32: it saves no compute and "
                                "loses the parameters' precision");
}

PrecisionPolicy parse_policy_string(const std::string& text) {
  // JMP: "params=float32,compute=float16,output=float32", keys p/c/o too;
  // missing keys default to float32 for params and to compute for output.
  DType param = DType::F32, compute = DType::F32, output = DType::F32;
  bool have_param = false, have_compute = false, have_output = false;
  std::istringstream in(text);
  for (std::string term; std::getline(in, term, ',');) {
    term = trim(term);
    size_t eq = term.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("precision '" + text + "': '" + term + "' is not key=dtype; " + accepted_forms());
    std::string key = trim(term.substr(0, eq)), value = trim(term.substr(eq + 1));
    DType t;
    if (!parse_dtype(value, t))
      throw std::invalid_argument("precision '" + text + "': unknown dtype '" + value +
                                  "' (expected float32, float16, bfloat16, f32, f16, bf16, half or full)");
    bool* seen;
    if (key == "params" || key == "p") param = t, seen = &have_param;
    else if (key == "compute" || key == "c") compute = t, seen = &have_compute;
    else if (key == "output" || key == "o") output = t, seen = &have_output;
    else throw std::invalid_argument("precision '" + text + "': unknown key '" + key + "' (expected params/p, compute/c, output/o)");
    if (*seen) throw std::invalid_argument("precision '" + text + "': '" + key + "' is given twice");
    *seen = true;
  }
  if (!have_output) output = compute;
  return make(text, param, param == DType::F32, compute, output);
}

// The named precisions in display order (reports sort cells by it), each with
// the policy it stands for. The one list of names: the config's did-you-mean
// hint, the "expected ..." message, `runner describe` and the manifest's
// vocabulary (and through it the Python reports) all read it.
struct NamedPrecision {
  const char* name;
  PrecisionPolicy (*policy)(const std::string& name);
};
const NamedPrecision kNamedPrecisionTable[] = {
    {"fp32", [](const std::string& n) { return make(n, DType::F32, true, DType::F32, DType::F32); }},
    {"tf32",
     [](const std::string& n) {
       PrecisionPolicy p = make(n, DType::F32, true, DType::F32, DType::F32);
       p.gemm = GemmCompute::TF32;
       return p;
     }},
    // bf16 before fp16: the order reports have always used.
    {"amp_bf16", [](const std::string& n) { return make(n, DType::F32, true, DType::BF16, DType::BF16); }},
    // Autocast: fp32 weights cast to half for the GEMMs, half activations;
    // softmax/loss/reductions read them in fp32.
    {"amp_fp16", [](const std::string& n) { return make(n, DType::F32, true, DType::F16, DType::F16); }},
    // amp_bf16, with the linear layers' GEMMs in FP8 (models/linear.h).
    {"fp8",
     [](const std::string& n) {
       PrecisionPolicy p = make(n, DType::F32, true, DType::BF16, DType::BF16);
       p.fp8 = true;
       return p;
     }},
    {"O0", [](const std::string& n) { return make(n, DType::F32, true, DType::F32, DType::F32); }},
    {"O1", [](const std::string& n) { return make(n, DType::F32, true, DType::F16, DType::F16); }},
    // apex O2: the model itself is half (weights and gradients), the
    // optimizer steps an fp32 master copy.
    {"O2", [](const std::string& n) { return make(n, DType::F16, true, DType::F16, DType::F16); }},
    // apex O3: pure half, no master weights.
    {"O3", [](const std::string& n) { return make(n, DType::F16, false, DType::F16, DType::F16); }},
};

std::string accepted_forms() {
  std::string names;
  for (const auto& entry : kNamedPrecisionTable) names += std::string(entry.name) + ", ";
  return "expected " + names + "a dtype (float32, float16, bfloat16, half, full) or "
         "a policy string like params=float32,compute=float16,output=float32";
}

}  // namespace

std::string PrecisionPolicy::describe() const {
  return std::string("params=") + dtype_name(param) + ",compute=" + dtype_name(compute) + ",output=" +
         dtype_name(output) + ",gemm=" + gemm_compute_name(gemm) + ",master=" + (master_weights ? "yes" : "no") +
         (fp8 ? ",linear_gemm=fp8(e4m3 fwd,e5m2 grad)" : "");
}

const std::vector<std::string>& named_precisions() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : kNamedPrecisionTable) out.push_back(entry.name);
    return out;
  }();
  return names;
}

PrecisionPolicy resolve_policy(const std::string& text) {
  const std::string s = trim(text);
  PrecisionPolicy p;
  DType bare;
  const NamedPrecision* named = nullptr;
  for (const auto& entry : kNamedPrecisionTable)
    if (s == entry.name) named = &entry;
  if (named) {
    p = named->policy(s);
  } else if (parse_dtype(s, bare)) {
    // JMP: a bare dtype sets all three.
    p = make(s, bare, bare == DType::F32, bare, bare);
  } else if (s.find('=') != std::string::npos) {
    p = parse_policy_string(s);
  } else {
    throw std::invalid_argument("unknown precision '" + text + "'; " + accepted_forms());
  }
  check_sensible(p, text);
  return p;
}

// Why these values
// - fp16 (max 65504): -1e9 (or -1e12, bert4keras' default, or -inf) rounds
//   to -inf when the framework materialises the mask in fp16, and the real
//   keys then get (1 - 1) * (-inf) = NaN. -1e4 is exactly representable
//   (10000 = 1250 * 2^3), 0 * -1e4 = 0, and scale*score + (-1e4) stays finite
//   for any |scale*score| < 55504, while exp(-1e4 + (real logit - max)) is 0 in
//   fp32 whenever the real logits are within 1e4 - 88 of each other: padded
//   keys get exactly zero weight. This is the value TF BERT and bert4keras use
//   under fp16 (and HF transformers' original -10000.0).
// - fp32/bf16 (max ~3.4e38): -1e9 is finite (bf16 rounds it to -999292928)
//   and far below any real logit, so it never leaks probability even with
//   large, unscaled scores where -1e4 could.
float attention_mask_value(DType compute) { return compute == DType::F16 ? -1e4f : -1e9f; }

// Why: a half-precision LayerNorm (apex O3, a framework running its LayerNorm
// in the activations' dtype) evaluates var + eps in fp16. Its smallest
// subnormal is 2^-24 ~ 6e-8, so BERT's 1e-12 rounds to 0, and a constant row
// (var = 0: padding rows, a dead feature) gives rsqrt(0) = inf and
// (x - mean) * inf = 0 * inf = NaN. Values just above the subnormal floor
// survive with a few significant bits only, and 1/sqrt(6e-8) = 4096 magnifies
// the fp16 rounding noise of a "constant" row into O(1) outputs. 1e-5 (PyTorch's
// nn.LayerNorm default; bert4keras sets K.set_epsilon(1e-5) for fp16) is
// represented to within 0.3% (168 subnormal ulps) and bounds rstd by 316.
// bf16 and fp32 share fp32's exponent range, where 1e-12 is a normal number
// and 1/sqrt(1e-12) = 1e6 is finite: the requested value is kept.
float layernorm_eps(DType compute, float requested) {
  if (compute == DType::F16) return requested > 1e-5f ? requested : 1e-5f;
  return requested;
}

}  // namespace mpb
