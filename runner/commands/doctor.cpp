// `runner doctor`: its command line, the order the checks run in, the lines
// it prints and the JSON it writes. The checks themselves:
// doctor_system.cpp (machine) and doctor_device.cpp (GPU, device, GEMMs, ops).
#include "runner/commands/doctor.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <exception>

#include "runner/io/atomic_file.h"
#include "runner/io/output_path.h"
#include "runner/commands/cli_text.h"
#include "runner/commands/doctor_checks.h"
#include "runner/results/manifest.h"
#include "runner/io/seconds_since.h"

namespace mpb {

const char* check_status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::Ok: return "ok";
    case CheckStatus::Warn: return "warn";
    case CheckStatus::Fail: return "FAIL";
  }
  return "?";
}

std::string doctor_line(const DoctorCheck& c) {
  char head[48];
  std::snprintf(head, sizeof head, "%-5s %-13s ", check_status_name(c.status), c.name.c_str());
  return head + c.finding + (c.meaning.empty() ? "" : " — " + c.meaning);
}

namespace {

// A check that throws is a bug in the doctor, and still an answer: FAIL with
// the exception's text, and the other checks go on.
DoctorCheck failed_check(const std::string& name, const std::exception& e) {
  DoctorCheck c;
  c.name = name;
  c.status = CheckStatus::Fail;
  c.finding = std::string("the check threw: ") + e.what();
  return c;
}

}  // namespace

std::vector<DoctorCheck> run_doctor_checks(const DoctorOptions& opt) {
  std::vector<DoctorCheck> checks;
  auto add = [&](DoctorCheck c) {
    std::printf("%s\n", doctor_line(c).c_str());
    std::fflush(stdout);
    checks.push_back(std::move(c));
  };
  auto run = [&](const std::string& name, const auto& check) {
    try {
      add(check());
    } catch (const std::exception& e) {
      add(failed_check(name, e));
    }
  };
  // Load first: before this process starts GEMMs of its own, and while it
  // sleeps, so the window sees only the rest of the machine.
  run("machine load", [&] { return doctor::sample_machine_load(opt.load_seconds); });
  run("build", [] { return doctor::check_build(); });
  const CpuClocks clocks = read_cpu_clocks();
  run("cpu governor", [&] { return doctor::check_cpu_governor(clocks); });
  run("cpu clock", [&] { return doctor::check_cpu_clock(clocks); });
  run("memory", [] { return doctor::check_memory(read_memory_info()); });
  run("disk", [&] { return doctor::check_disk(free_disk_space(opt.out_dir)); });
  run("environment", [] { return doctor::check_environment(find_overrides(process_environment())); });
  run("gpu", [&] { return doctor::check_cuda(opt.device); });
  DoctorCheck device_check;
  std::unique_ptr<Device> dev = doctor::open_device(opt.device, &device_check);  // never throws
  add(device_check);
  if (!dev) {
    DoctorCheck skipped;
    skipped.name = "gemm, selftest";
    skipped.status = CheckStatus::Warn;
    skipped.finding = "not run: no device (see the device line)";
    add(skipped);
    return checks;
  }
  try {
    for (DoctorCheck& c : doctor::check_gemm_ceilings(*dev, opt.gemm_size, opt.gemm_reps)) add(std::move(c));
  } catch (const std::exception& e) {
    add(failed_check("gemm", e));
  }
  run("energy", [&] { return doctor::check_energy(*dev); });
  run("selftest", [&] { return doctor::check_selftest(*dev, opt.selftest_seconds); });
  return checks;
}

nlohmann::json doctor_json(const DoctorOptions& opt, const std::vector<DoctorCheck>& checks, double seconds) {
  nlohmann::json list = nlohmann::json::array();
  int blockers = 0, warnings = 0;
  for (const DoctorCheck& c : checks) {
    list.push_back({{"name", c.name}, {"status", check_status_name(c.status)}, {"finding", c.finding},
                    {"meaning", c.meaning}, {"data", c.data}});
    blockers += c.status == CheckStatus::Fail;
    warnings += c.status == CheckStatus::Warn;
  }
  return {{"schema", "mpbench.doctor/1"},
          {"options", {{"device", opt.device}, {"out", opt.out_dir}, {"selftest_seconds", opt.selftest_seconds},
                       {"load_seconds", opt.load_seconds}, {"gemm_size", opt.gemm_size}, {"gemm_reps", opt.gemm_reps}}},
          {"checks", list},
          {"blockers", blockers},
          {"warnings", warnings},
          {"seconds", seconds},
          {"exit_code", blockers ? 1 : 0}};
}

int run_doctor(int argc, char** argv) {
  CLI::App app{"runner doctor: checks this machine before measuring on it (GPU, driver and libraries, CPU "
               "governor and clock, other busy processes, free memory and disk, environment overrides, GEMM "
               "ceilings, a subset of the op checks). Exit 0: no blocker; 1: a blocker; 2: bad command line"};
  app.name("runner doctor");
  DoctorOptions opt;
  app.add_option("--device", opt.device, "the device runs will use: cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->default_val("auto");
  app.add_option("--out", opt.out_dir, "the results root runs will write to (its free disk space is checked)")
      ->default_val("results");
  CLI::Option* json_opt = app.add_option("--json", opt.json_path, "also write the checks as JSON to FILE: a file is replaced atomically; -, a device, a "
                 "FIFO or a symlink (/dev/stdout) is written in place; a directory or a missing parent is refused "
                 "(exit 2) before the checks run")->type_name("FILE");
  // A number within [lo, hi], `fallback` when not given.
  const auto bounded = [&app](const char* flag, auto& value, const char* what, auto lo, auto hi, auto fallback) {
    app.add_option(flag, value, what)->check(finite_range(lo, hi))->default_val(fallback);
  };
  bounded("--selftest-seconds", opt.selftest_seconds, "time budget of the op checks on the device (0: skip them)",
          0.0, 3600.0, 10.0);
  bounded("--load-seconds", opt.load_seconds, "how long to watch other processes' CPU use", 0.05, 60.0, 1.0);
  bounded("--gemm-size", opt.gemm_size,
          "n of the n x n x n ceiling GEMMs (0: what runs use, 1024 on a CPU, 8192 on a GPU)", 0, 65536, 0);
  bounded("--gemm-reps", opt.gemm_reps, "timed GEMMs per mode (the best counts)", 1, 100, 3);
  use_runner_cli_text(app, "runner doctor");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (json_opt->count() && opt.json_path.empty()) {  // '' would silently write nothing
    std::fprintf(stderr, "error: --json '': name a file (or - for standard output)\n");
    return 2;
  }
  // The output path is judged before its checks run: a directory or a missing parent
  // fails now, not after minutes of work (runner/io/output_path.h).
  if (!opt.json_path.empty()) {
    try {
      check_output_path(opt.json_path);
    } catch (const OutputPathError& e) {
      std::fprintf(stderr, "error: --json: %s\n", e.what());
      return 2;
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  const std::string started = utc_now_iso8601();
  std::printf("mpbench doctor: --device %s, results in %s\n", opt.device.c_str(), opt.out_dir.c_str());
  const std::vector<DoctorCheck> checks = run_doctor_checks(opt);
  const double seconds = seconds_since(t0);
  nlohmann::json report = doctor_json(opt, checks, seconds);
  report["started"] = started;
  const int blockers = report["blockers"].get<int>(), warnings = report["warnings"].get<int>();
  std::printf("doctor: %d blocker%s, %d warning%s (%.1f s)%s\n", blockers, blockers == 1 ? "" : "s", warnings,
              warnings == 1 ? "" : "s", seconds,
              blockers ? ": fix the FAIL lines before measuring" : "");
  if (!opt.json_path.empty()) {
    try {
      write_file_atomic(opt.json_path, report.dump(1) + "\n");
    } catch (const std::exception& e) {  // a full disk, a reader that closed the pipe (EPIPE)
      std::fprintf(stderr, "error: --json: %s\n", e.what());
      return 2;
    }
  }
  return report["exit_code"].get<int>();
}

}  // namespace mpb
