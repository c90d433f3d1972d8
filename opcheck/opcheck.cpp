#include "opcheck/opcheck.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "backends/cpu/cpu_device.h"
#include "opcheck/cases.h"
#ifdef MPB_HAVE_CUDA
#include "backends/cuda/cuda_device.h"
#endif

namespace mpb::opcheck {

namespace {
constexpr size_t kMaxMessages = 6;

std::string num(double x) {
  std::ostringstream s;
  s.precision(6);
  s << x;
  return s.str();
}
}  // namespace

const Host& Outputs::operator[](const std::string& name) const {
  for (const auto& [n, h] : tensors)
    if (n == name) return h;
  throw std::logic_error("opcheck: no output '" + name + "'");
}

double Outputs::scalar(const std::string& name) const {
  for (const auto& [n, v] : scalars)
    if (n == name) return v;
  throw std::logic_error("opcheck: no scalar output '" + name + "'");
}

const char* status_name(Status s) {
  switch (s) {
    case Status::Pass: return "pass";
    case Status::Fail: return "FAIL";
    case Status::Skip: return "skip";
  }
  return "?";
}

std::string OpCase::name() const { return op + "/" + variant + "/" + dtype; }

// ---- Check ------------------------------------------------------------------------------------

void Check::fail(const std::string& msg) {
  ++r_.failed;
  r_.status = Status::Fail;
  if (r_.failures.size() < kMaxMessages) r_.failures.push_back(msg);
}

void Check::near(const std::string& what, const Host& got, const std::vector<double>& ref, const TolFn& tol) {
  if (static_cast<int64_t>(ref.size()) != got.numel()) {
    fail(what + ": " + std::to_string(got.numel()) + " elements, reference has " + std::to_string(ref.size()));
    return;
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.value(i), w = ref[static_cast<size_t>(i)];
    ++r_.checked;
    if ((std::isnan(g) && std::isnan(w)) || g == w) continue;  // equal infinities included
    const double t = tol(i);
    const double d = std::fabs(g - w);
    if (std::isfinite(d)) r_.max_err = std::max(r_.max_err, d);
    const double ratio = t > 0 ? d / t : INFINITY;
    r_.worst_ratio = std::max(r_.worst_ratio, std::isnan(ratio) ? INFINITY : ratio);
    if (!(d <= t))
      fail(what + "[" + std::to_string(i) + "] = " + num(g) + ", float64 reference " + num(w) + ", |error| " + num(d) +
           " > bound " + num(t));
  }
}

void Check::near(const std::string& what, const Host& got, const std::vector<double>& ref,
                 const std::vector<double>& tol) {
  near(what, got, ref, [&](int64_t i) { return tol[static_cast<size_t>(i)]; });
}

void Check::exact(const std::string& what, const Host& got, const std::vector<double>& ref) {
  near(what, got, ref, [](int64_t) { return 0.0; });
}

void Check::scalar(const std::string& what, double got, double ref, double tol) {
  ++r_.checked;
  if ((std::isnan(got) && std::isnan(ref)) || got == ref) return;
  const double d = std::fabs(got - ref);
  if (std::isfinite(d)) r_.max_err = std::max(r_.max_err, d);
  r_.worst_ratio = std::max(r_.worst_ratio, tol > 0 ? d / tol : INFINITY);
  if (!(d <= tol)) fail(what + " = " + num(got) + ", float64 reference " + num(ref) + ", |error| " + num(d) + " > bound " + num(tol));
}

void Check::expect(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

void Check::note(const std::string& what) { r_.notes.push_back(what); }

void Check::same_bits(const std::string& what, const Host& a, const Host& b) {
  std::string where;
  if (!identical(a, b, &where)) fail(what + ": not the same bits, first difference " + where);
}

void Check::vs_cpu(const std::string& what, const Host& got, const Host& cpu, const CpuTolFn& tol) {
  if (got.numel() != cpu.numel()) {
    fail(what + ": element counts differ from the CPU's");
    return;
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.value(i), w = cpu.value(i);
    if ((std::isnan(g) && std::isnan(w)) || g == w) continue;
    const bool finite = std::isfinite(g) && std::isfinite(w);
    const double t = finite ? tol(i, w) : 0.0;
    const double d = std::fabs(g - w);
    if (std::isfinite(d)) r_.cpu_max_diff = std::max(r_.cpu_max_diff, d);
    r_.cpu_worst_ratio = std::max(r_.cpu_worst_ratio, t > 0 && finite ? d / t : INFINITY);
    if (!finite || !(d <= t))
      fail(what + "[" + std::to_string(i) + "] = " + num(g) + ", CPU " + num(w) + ", |diff| " + num(d) + " > bound " + num(t));
  }
}

void Check::vs_cpu_scalar(const std::string& what, double got, double cpu, double tol) {
  if ((std::isnan(got) && std::isnan(cpu)) || got == cpu) return;
  const double d = std::fabs(got - cpu);
  if (std::isfinite(d)) r_.cpu_max_diff = std::max(r_.cpu_max_diff, d);
  r_.cpu_worst_ratio = std::max(r_.cpu_worst_ratio, tol > 0 ? d / tol : INFINITY);
  if (!(d <= tol)) fail(what + " = " + num(got) + ", CPU " + num(cpu) + ", |diff| " + num(d) + " > bound " + num(tol));
}

void Instance::check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) {
  for (const auto& [name, h] : got.tensors) c.same_bits(name + " vs the CPU", h, cpu[name]);
  for (const auto& [name, v] : got.scalars) c.vs_cpu_scalar(name, v, cpu.scalar(name), 0.0);
}

// ---- running ------------------------------------------------------------------------------------

namespace {

OpResult header(const OpCase& c, const std::string& backend) {
  OpResult r;
  r.op = c.op, r.variant = c.variant, r.dtype = c.dtype, r.backend = backend;
  r.size = c.size, r.tolerance = c.tolerance;
  return r;
}

bool same_bits(const Outputs& a, const Outputs& b, std::string* where) {
  for (const auto& [name, h] : a.tensors) {
    std::string w;
    if (!identical(h, b[name], &w)) {
      if (where) *where = name + w;
      return false;
    }
  }
  for (const auto& [name, v] : a.scalars) {
    const double o = b.scalar(name);
    if (!(v == o || (std::isnan(v) && std::isnan(o)))) {
      if (where) *where = name + ": " + num(v) + " vs " + num(o);
      return false;
    }
  }
  return true;
}

}  // namespace

OpResult run_case(const OpCase& c, Device& dev, Device* cpu_reference) {
  const auto t0 = std::chrono::steady_clock::now();
  const DeviceKind kind = dev.info().kind;
  OpResult r = header(c, device_kind_name(kind));
  Check chk(r, kind == DeviceKind::Cuda);
  try {
    std::unique_ptr<Instance> inst = c.make();
    const Outputs got = inst->run(dev);
    if (c.rerun) {
      std::string where;
      if (!same_bits(inst->run(dev), got, &where)) chk.fail("a second run gave other bits (not deterministic): " + where);
    }
    inst->check(chk, dev, got);
    if (cpu_reference != nullptr && cpu_reference != &dev && kind != DeviceKind::Cpu) {
      const Outputs cpu = inst->run(*cpu_reference);
      r.vs_cpu = true;
      r.bitwise_promised = c.bitwise_vs_cpu;
      std::string where;
      r.bitwise = same_bits(got, cpu, &where);
      if (c.bitwise_vs_cpu) {
        if (!r.bitwise) chk.fail("promised the CPU's bits, differs at " + where);
      } else {
        inst->check_vs_cpu(chk, got, cpu);
      }
    }
    dev.synchronize();
  } catch (const std::exception& e) {
    chk.fail(std::string("threw: ") + e.what());
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

OpResult skipped(const OpCase& c, const std::string& backend, const std::string& reason) {
  OpResult r = header(c, backend);
  r.status = Status::Skip;
  r.skip_reason = reason;
  return r;
}

// ---- backends ---------------------------------------------------------------------------------

std::vector<std::string> backend_names() {
#ifdef MPB_HAVE_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::optional<std::string> backend_unavailable(const std::string& name) {
  if (name == "cpu") return cpu_device_unavailable();  // a bad MPB_CPU_ISA
#ifdef MPB_HAVE_CUDA
  if (name == "cuda") return cuda_unavailable_reason();
#endif
  if (name == "cuda") return std::string("not built with the CUDA backend (MPB_CUDA=OFF)");
  return "unknown backend '" + name + "' (cpu, cuda)";
}

std::unique_ptr<Device> make_backend(const std::string& name) {
  if (auto why = backend_unavailable(name)) throw DeviceError(*why);
#ifdef MPB_HAVE_CUDA
  if (name == "cuda") return make_cuda_device();
#endif
  return make_cpu_device();
}

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> v;
    add_elementwise_cases(v);
    add_reduction_cases(v);
    add_layernorm_cases(v);
    add_attention_cases(v);
    add_embedding_cases(v);
    add_label_position_cases(v);
    add_optimizer_cases(v);
    add_decide_step_cases(v);
    add_fp8_scale_cases(v);
    add_gemm_cases(v);
    return v;
  }();
  return cases;
}

std::vector<const OpCase*> select_cases(bool quick) {
  std::vector<const OpCase*> out;
  for (const OpCase& c : op_cases())
    if (!quick || c.size == Size::Small) out.push_back(&c);
  return out;
}

}  // namespace mpb::opcheck
