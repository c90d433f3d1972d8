// One table of Device op cases, each with a float64 reference, run against
// every backend (after ggml's tests/test-backend-ops.cpp). The GoogleTest
// suite (tests/ops) instantiates one test per case per backend; `runner
// doctor` runs a time-boxed subset of the same table on the device it checks.
//
// A case runs its op(s) on the device under test from inputs it generates
// itself (deterministically: every backend sees the same bytes), and then
//  * compares every output with a float64 reference, element by element,
//    within a bound derived in the case's comment (per precision: worst-case
//    rounding bounds, never fitted to measurements);
//  * checks properties of the op (padded keys exactly 0, gaps never
//    written, in-place equals out-of-place, ...);
//  * runs again and requires the same bits (every Device op is
//    deterministic: fixed reduction orders on both backends);
//  * on a non-CPU backend, when a CPU device is given, runs on the CPU too
//    and compares: bit for bit where the backends promise it (both evaluate
//    the same scalar cores, ops/*.h, in the same order), otherwise within the
//    backend-vs-CPU bound the case derives (reordered fp32 sums, tensor-core
//    accumulation, cuBLASLt's own GELU).
//
// Tolerances are in units of u = 2^-24 (fp32 unit roundoff) and of the
// output format's ulp; a 16-bit output adds half an ulp (rounding of the
// exact value) or one ulp (two computed values straddling a boundary).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "opcheck/host.h"

namespace mpb::opcheck {

// Small cases run in well under a second each on the CPU; Bert cases use
// BERT-base shapes (T = 128, H = 12, D = 64, C = 768).
enum class Size { Small, Bert };

// What one run of a case produced: named tensors and host scalars (losses,
// counts, sums), in the order the case added them.
struct Outputs {
  std::vector<std::pair<std::string, Host>> tensors;
  std::vector<std::pair<std::string, double>> scalars;
  void add(const std::string& name, Host h) { tensors.emplace_back(name, std::move(h)); }
  void add(const std::string& name, Device& dev, const Tensor& t) { add(name, fetch(dev, t)); }
  void scalar(const std::string& name, double v) { scalars.emplace_back(name, v); }
  const Host& operator[](const std::string& name) const;
  double scalar(const std::string& name) const;
};

enum class Status { Pass, Fail, Skip };
const char* status_name(Status s);  // "pass", "FAIL", "skip"

// The outcome of one case on one backend.
struct OpResult {
  std::string op;        // the Device op checked (e.g. "layernorm_backward")
  std::string variant;   // shape and mode label
  std::string dtype;     // the dtypes involved
  std::string backend;   // "cpu", "cuda"
  Size size = Size::Small;
  Status status = Status::Pass;
  std::string skip_reason;
  std::string tolerance;    // the bound used vs float64, and why
  double max_err = 0.0;     // max |got - float64 reference| over the checked elements
  double worst_ratio = 0.0; // max |got - reference| / bound (a pass is <= 1)
  int64_t checked = 0;      // elements compared with the reference
  // Against the CPU backend (non-CPU backends given a CPU device):
  bool vs_cpu = false;           // the comparison ran
  bool bitwise_promised = false; // the backends promise identical bits
  bool bitwise = false;          // every output had the CPU's bits
  double cpu_max_diff = 0.0, cpu_worst_ratio = 0.0;
  int64_t failed = 0;                 // failed element / property checks
  std::vector<std::string> failures;  // the first few, each naming what and where
  std::vector<std::string> notes;     // what the case observed (e.g. the GPU's TF32 rounding)
  double seconds = 0.0;
};

// The checks a case makes; collects into an OpResult.
class Check {
 public:
  Check(OpResult& r, bool cuda) : r_(r), cuda_(cuda) {}
  // The device under test is the CUDA backend: float64 bounds then add the
  // case's GPU-vs-CPU bound (|gpu - exact| <= |gpu - cpu| + |cpu - exact|).
  bool cuda() const { return cuda_; }

  using TolFn = std::function<double(int64_t i)>;
  // got[i] vs ref[i] within tol(i); NaN matches NaN, inf matches inf.
  void near(const std::string& what, const Host& got, const std::vector<double>& ref, const TolFn& tol);
  void near(const std::string& what, const Host& got, const std::vector<double>& ref, const std::vector<double>& tol);
  void exact(const std::string& what, const Host& got, const std::vector<double>& ref);
  void scalar(const std::string& what, double got, double ref, double tol);
  // A property of the op on this device.
  void expect(bool ok, const std::string& what);
  void note(const std::string& what);
  void same_bits(const std::string& what, const Host& a, const Host& b);
  // Against the CPU backend's result (within tol(i, cpu value)).
  using CpuTolFn = std::function<double(int64_t i, double cpu_value)>;
  void vs_cpu(const std::string& what, const Host& got, const Host& cpu, const CpuTolFn& tol);
  void vs_cpu_scalar(const std::string& what, double got, double cpu, double tol);

  void fail(const std::string& msg);

 private:
  OpResult& r_;
  bool cuda_;
};

// One prepared case: inputs generated, ready to run on any device.
class Instance {
 public:
  virtual ~Instance() = default;
  // Uploads the inputs to `dev`, runs the op(s), returns the outputs.
  virtual Outputs run(Device& dev) = 0;
  // Outputs vs the float64 reference, and the op's properties on this device.
  virtual void check(Check& c, Device& dev, const Outputs& got) = 0;
  // Only for cases that don't promise the CPU's bits: got vs the CPU's outputs.
  virtual void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu);
};

struct OpCase {
  std::string op, variant, dtype;
  Size size = Size::Small;
  std::string tolerance;        // the bound in words (the derivation is in the case's comment)
  bool bitwise_vs_cpu = false;  // other backends promise the CPU's bits
  bool rerun = true;            // a second run must give the same bits
  std::function<std::unique_ptr<Instance>()> make;

  std::string name() const;  // "op/variant/dtype"
};

// Every case, small and Bert-shaped, in a fixed order (cheap: instances are
// made only when a case runs).
const std::vector<OpCase>& op_cases();
// The cases to run: quick selects the small ones (selftest --quick), else all.
std::vector<const OpCase*> select_cases(bool quick);

// Runs one case on `dev`; on a non-CPU `dev` also on `cpu_reference` (when
// given) and compares. Exceptions become failures.
OpResult run_case(const OpCase& c, Device& dev, Device* cpu_reference);
// The result of a case that can't run on `backend` (no device): a skip.
OpResult skipped(const OpCase& c, const std::string& backend, const std::string& reason);

// Backends built into this binary: "cpu" always, "cuda" when built.
std::vector<std::string> backend_names();
// Why `name` can't run here (no GPU, unknown name), or nothing.
std::optional<std::string> backend_unavailable(const std::string& name);
std::unique_ptr<Device> make_backend(const std::string& name);

}  // namespace mpb::opcheck
