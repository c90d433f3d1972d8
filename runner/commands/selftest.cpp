// `runner selftest`; see selftest.h.
#include "runner/commands/selftest.h"

#include "runner/commands/cli_text.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "backends/cpu/cpu_device.h"
#include "runner/io/atomic_file.h"
#include "runner/io/output_path.h"
#include "runner/machine/device_factory.h"
#include "runner/results/manifest.h"
#include "runner/io/seconds_since.h"
#include "runner/machine/system_resources.h"
#include "runner/results/terminal_table.h"

namespace mpb {

namespace {

const char* size_name(opcheck::Size s) { return s == opcheck::Size::Bert ? "bert" : "small"; }

nlohmann::json device_facts(const Device& dev) {
  const DeviceInfo& info = dev.info();
  nlohmann::json f = {{"kind", device_kind_name(info.kind)}, {"name", info.name}};
  if (info.kind == DeviceKind::Cuda) {
    f["compute_capability"] = info.compute_capability.value_or("?");
    f["multiprocessors"] = info.cores;
    f["memory_bytes"] = info.memory_bytes;
  } else {
    f["threads"] = info.cores;
    const MemoryInfo mem = read_memory_info();
    f["memory_bytes"] = mem.total_bytes ? nlohmann::json(*mem.total_bytes) : nlohmann::json(nullptr);
    f["cpu_kernels"] = cpu_kernels_json(info);
  }
  nlohmann::json versions = nlohmann::json::object();
  for (const auto& [k, v] : info.versions) versions[k] = v;
  f["versions"] = versions;
  return f;
}

std::string facts_line(const nlohmann::json& f) {
  std::string s = f["kind"].get<std::string>() + ": " + f["name"].get<std::string>();
  if (f["kind"] == "cuda") {
    s += ", cc " + f["compute_capability"].get<std::string>() + ", " +
         std::to_string(f["multiprocessors"].get<int>()) + " SMs, " +
         human_bytes(f["memory_bytes"].get<double>());
  } else {
    s += ", " + std::to_string(f["threads"].get<int>()) + " threads";
    if (!f["memory_bytes"].is_null()) s += ", " + human_bytes(f["memory_bytes"].get<double>());
    const nlohmann::json& k = f["cpu_kernels"];
    s += ", kernels " + k.value("isa", std::string("?")) + " (" + k.value("source", std::string("?")) +
         "), GEMMs " + k.value("gemm", std::string("?"));
  }
  return s;
}

// The GEMM case's observation of how TF32 rounds operands (opcheck/cases_gemm.cpp).
std::string tf32_rounding(const std::vector<opcheck::OpResult>& ops) {
  for (const opcheck::OpResult& r : ops)
    for (const std::string& n : r.notes)
      if (n.rfind("TF32 operand rounding", 0) == 0) return n;
  return "";
}

std::string case_name(const opcheck::OpResult& r) { return r.op + "/" + r.variant + "/" + r.dtype; }

// The "vs CPU" cell of one case or one op's cases.
struct VsCpu {
  int compared = 0, promised = 0, bitwise = 0;
  double worst_ratio = 0.0;
  void add(const opcheck::OpResult& r) {
    if (!r.vs_cpu) return;
    ++compared;
    promised += r.bitwise_promised;
    bitwise += r.bitwise;
    worst_ratio = std::max(worst_ratio, r.cpu_worst_ratio);
  }
  std::string text() const {
    if (!compared) return "-";
    std::string s = "bits " + std::to_string(bitwise) + "/" + std::to_string(compared);
    if (promised) s += " (" + std::to_string(promised) + " promised)";
    if (bitwise < compared) s += fmt(", %.2f of bound", worst_ratio);
    return s;
  }
};

}  // namespace

int SelftestReport::failed() const {
  int n = 0;
  for (const opcheck::OpResult& r : ops) n += r.status == opcheck::Status::Fail;
  for (const selftest::TrainingCheck& t : training) n += t.status == opcheck::Status::Fail;
  return n;
}

SelftestReport run_selftest_checks(Device& dev, Device& cpu, bool quick,
                                   const std::function<void(const std::string&)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  SelftestReport r;
  r.facts = device_facts(dev);
  // On a GPU every case is also compared with the CPU backend, as tests/ops does.
  Device* cpu_reference = dev.info().kind == DeviceKind::Cpu ? nullptr : &cpu;
  std::string last_op;
  for (const opcheck::OpCase* c : opcheck::select_cases(quick)) {
    if (progress && c->op != last_op) progress(c->op);
    last_op = c->op;
    r.ops.push_back(opcheck::run_case(*c, dev, cpu_reference));
  }
  r.training = selftest::training_checks(dev, cpu, quick, progress);
  const std::string tf32 = tf32_rounding(r.ops);
  r.facts["tf32_rounding"] = tf32.empty() ? nlohmann::json(nullptr) : nlohmann::json(tf32);
  r.seconds = seconds_since(t0);
  return r;
}

std::string selftest_table(const SelftestReport& r, bool verbose) {
  std::string out = "device: " + facts_line(r.facts) + "\n";
  if (r.facts["tf32_rounding"].is_string()) out += r.facts["tf32_rounding"].get<std::string>() + "\n";

  // One row per op, in the table's order.
  struct OpRow {
    int cases = 0, failed = 0, skipped = 0;
    double worst_ratio = 0.0, max_err = 0.0, seconds = 0.0;
    VsCpu vs_cpu;
  };
  std::vector<std::string> order;
  std::map<std::string, OpRow> rows;
  for (const opcheck::OpResult& c : r.ops) {
    if (!rows.count(c.op)) order.push_back(c.op);
    OpRow& row = rows[c.op];
    ++row.cases;
    row.failed += c.status == opcheck::Status::Fail;
    row.skipped += c.status == opcheck::Status::Skip;
    if (c.worst_ratio >= row.worst_ratio) {
      row.worst_ratio = c.worst_ratio;
      row.max_err = c.max_err;
    }
    row.seconds += c.seconds;
    row.vs_cpu.add(c);
  }
  out += fmt("\n%-32s %5s %5s %5s %10s %9s  %-28s %6s\n", "op", "cases", "FAIL", "skip", "max |err|", "err/bound",
             "vs CPU", "s");
  for (const std::string& op : order) {
    const OpRow& row = rows[op];
    out += fmt("%-32s %5d %5d %5d %10.2e %9.3f  %-28s %6.2f\n", op.c_str(), row.cases, row.failed, row.skipped,
               row.max_err, row.worst_ratio, row.vs_cpu.text().c_str(), row.seconds);
  }
  // Cases on their own line: every failed one, or all of them.
  std::string cases;
  for (const opcheck::OpResult& c : r.ops) {
    if (!verbose && c.status != opcheck::Status::Fail) continue;
    VsCpu v;
    v.add(c);
    const std::string ratio = std::isfinite(c.worst_ratio) ? fmt("%.3f of ", c.worst_ratio) : "bound: ";
    cases += fmt("  %-4s %-60s err %.2e (%s%s)  vs CPU %s\n", opcheck::status_name(c.status), case_name(c).c_str(),
                 c.max_err, ratio.c_str(), c.tolerance.c_str(), v.text().c_str());
    if (c.status == opcheck::Status::Skip) cases += "       skipped: " + c.skip_reason + "\n";
    for (const std::string& f : c.failures) cases += "       " + f + "\n";
  }
  if (!cases.empty()) out += "\n" + std::string(verbose ? "every op case:\n" : "failed op cases:\n") + cases;

  out += fmt("\n%-36s %-6s %-40s %s\n", "training check", "result", "bound", "measured");
  for (const selftest::TrainingCheck& t : r.training) {
    out += fmt("%-36s %-6s %-40s %s\n", t.name.c_str(), opcheck::status_name(t.status), t.bound.c_str(),
               t.measured.c_str());
    for (const std::string& f : t.failures) out += "       " + f + "\n";
  }
  const int failed = r.failed();
  const size_t checks = r.ops.size() + r.training.size();
  out += fmt("\nselftest: %zu checks (%zu op cases, %zu training), %d failed, on %s in %.1f s%s\n", checks,
             r.ops.size(), r.training.size(), failed, r.facts["kind"].get<std::string>().c_str(), r.seconds,
             failed ? ": this device computes something wrongly; measurements on it time broken code" : "");
  return out;
}

nlohmann::json selftest_json(const SelftestReport& r) {
  nlohmann::json ops = nlohmann::json::array();
  for (const opcheck::OpResult& c : r.ops)
    ops.push_back({{"case", case_name(c)}, {"op", c.op}, {"variant", c.variant}, {"dtype", c.dtype},
                   {"size", size_name(c.size)}, {"status", opcheck::status_name(c.status)},
                   {"skip_reason", c.skip_reason}, {"tolerance", c.tolerance}, {"max_err", c.max_err},
                   {"worst_ratio", c.worst_ratio}, {"checked", c.checked}, {"vs_cpu", c.vs_cpu},
                   {"bitwise_promised", c.bitwise_promised}, {"bitwise", c.bitwise},
                   {"cpu_max_diff", c.cpu_max_diff}, {"cpu_worst_ratio", c.cpu_worst_ratio},
                   {"failures", c.failures}, {"notes", c.notes}, {"seconds", c.seconds}});
  nlohmann::json training = nlohmann::json::array();
  for (const selftest::TrainingCheck& t : r.training)
    training.push_back({{"name", t.name}, {"status", opcheck::status_name(t.status)}, {"measured", t.measured},
                        {"bound", t.bound}, {"worst_ratio", t.worst_ratio}, {"failures", t.failures},
                        {"seconds", t.seconds}});
  const int failed = r.failed();
  return {{"schema", "mpbench.selftest/1"}, {"device", r.facts}, {"ops", ops}, {"training", training},
          {"failed", failed}, {"seconds", r.seconds}, {"exit_code", failed ? 1 : 0}};
}

int run_selftest(int argc, char** argv) {
  CLI::App app{"runner selftest: every Device op against its float64 reference (and on a GPU against the CPU "
               "backend), the loss scaler's skip path, and a training step of the MLP and BERT-tiny in every "
               "precision against fp32 on the CPU. Exit 0: all passed; 1: a failure, or no such device; 2: bad "
               "command line"};
  app.name("runner selftest");
  std::string device = "auto", json_path;
  bool quick = false, verbose = false;
  app.add_option("--device", device, "the device to check: cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->default_val("auto");
  app.add_flag("--quick", quick, "the small op cases and the MLP's training steps only");
  app.add_flag("--verbose", verbose, "a line for every op case, not only the failed ones");
  CLI::Option* json_opt = app.add_option("--json", json_path, "also write every result as JSON to FILE: a file is replaced atomically; -, a device, "
                 "a FIFO or a symlink (/dev/stdout) is written in place; a directory or a missing parent is refused "
                 "(exit 2) before the checks run")->type_name("FILE");
  use_runner_cli_text(app, "runner selftest");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (json_opt->count() && json_path.empty()) {  // '' would silently write nothing
    std::fprintf(stderr, "error: --json '': name a file (or - for standard output)\n");
    return 2;
  }
  // The output path is judged before the checks run: a directory or a missing parent
  // fails now, not after minutes of work (runner/io/output_path.h).
  if (!json_path.empty()) {
    try {
      check_output_path(json_path);
    } catch (const OutputPathError& e) {
      std::fprintf(stderr, "error: --json: %s\n", e.what());
      return 2;
    }
  }

  std::unique_ptr<Device> dev, cpu;
  std::string notice;
  try {
    dev = make_device(device, &notice);
    if (dev->info().kind != DeviceKind::Cpu) cpu = make_cpu_device();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: selftest --device %s: %s\n", device.c_str(), e.what());
    return 1;
  }
  if (!notice.empty()) std::printf("note: %s\n", notice.c_str());
  std::printf("mpbench selftest on %s%s\n", dev->info().name.c_str(), quick ? " (--quick)" : "");
  std::fflush(stdout);
  const SelftestReport report = run_selftest_checks(*dev, cpu ? *cpu : *dev, quick);
  std::fputs(selftest_table(report, verbose).c_str(), stdout);
  if (!json_path.empty()) {
    try {
      write_file_atomic(json_path, selftest_json(report).dump(1) + "\n");
    } catch (const std::exception& e) {  // a full disk, a reader that closed the pipe (EPIPE)
      std::fprintf(stderr, "error: --json: %s\n", e.what());
      return 2;
    }
  }
  return report.failed() ? 1 : 0;
}

}  // namespace mpb
