// `runner selftest [--device cpu|cuda|auto] [--quick] [--json FILE] [--verbose]`:
// does this device compute what mpbench's measurements assume, in seconds?
//  * every case of the op-check table (opcheck/: every Device op, small and
//    BERT-shaped, every GEMM mode and epilogue the models use) against its
//    float64 reference, and on a GPU against the CPU backend too, bit for bit
//    where the backends promise it;
//  * the training checks (runner/commands/selftest_training.h): the loss scaler's
//    skip path, and one training step of the MLP and of BERT-tiny in every
//    precision and fusion setting against fp32 on the CPU backend;
//  * the device's facts (name, SMs or threads, memory, kernel builds, and the
//    TF32 operand rounding the GEMM case observed).
// One table row per op (every failed case on its own line, or every case
// with --verbose), one per training check. Exit 0: all passed; 1: a check
// failed, or the device can't be opened (`--device cuda` without a usable GPU
// says why in one line); 2: a bad command line. --quick runs the small op
// cases and the MLP's steps only. `runner doctor` runs a time-boxed subset.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "opcheck/opcheck.h"
#include "runner/commands/selftest_training.h"

namespace mpb {

struct SelftestReport {
  std::vector<opcheck::OpResult> ops;
  std::vector<selftest::TrainingCheck> training;
  nlohmann::json facts = nlohmann::json::object();  // what the device says of itself and the checks observed
  double seconds = 0.0;
  int failed() const;  // failed op cases + failed training checks
};

// Runs every check on `dev`; `cpu` is the CPU reference (`dev` itself on the
// CPU). `progress` is called with each check's name before it runs.
SelftestReport run_selftest_checks(Device& dev, Device& cpu, bool quick,
                                   const std::function<void(const std::string&)>& progress = {});

// The table: one row per op, failed cases and training checks (every case
// when `verbose`), and the summary line.
std::string selftest_table(const SelftestReport& r, bool verbose);
nlohmann::json selftest_json(const SelftestReport& r);

// `runner selftest ...`: argv[0] is "selftest". Returns the exit code.
int run_selftest(int argc, char** argv);

}  // namespace mpb
