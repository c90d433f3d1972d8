// The training checks of `runner selftest` (runner/commands/selftest.h): whole
// training steps rather than single ops, on the device under test.
//  * The loss scaler's skip path: an inf injected into a gradient skips the
//    step, leaves the master weights and the optimizer's moments bit for bit
//    unchanged, halves a dynamic scale, and the next step applies again.
//  * One training step of the MLP and of BERT-tiny in every precision and
//    fusion setting, against the same step in fp32, unfused, on the CPU
//    backend: the loss, and the update every parameter received.
#pragma once

#include <string>
#include <vector>

#include "core/device.h"
#include "opcheck/opcheck.h"

namespace mpb::selftest {

struct TrainingCheck {
  std::string name;      // "step bert-tiny amp_bf16 fused"
  opcheck::Status status = opcheck::Status::Pass;
  std::string measured;  // what was observed, in words and numbers
  std::string bound;     // the bound it was held to, in words
  double worst_ratio = 0.0;  // measured / bound (a pass is <= 1); 0 for exact checks that passed
  std::vector<std::string> failures;
  double seconds = 0.0;
};

// The relative error a precision's training step may have against the fp32
// step of the CPU backend (see the derivation in selftest_training.cpp):
// `gemms` is how many GEMMs a gradient passes through, `k_max` the longest
// reduction among them.
double step_error_bound(const std::string& precision, int gemms, int k_max);

// Runs every training check on `dev`, the fp32 references on `cpu` (a CPU
// device; may be `dev` itself when that is the CPU). `quick` leaves out BERT.
// `progress` is called before each check with its name (may be empty).
std::vector<TrainingCheck> training_checks(Device& dev, Device& cpu, bool quick,
                                           const std::function<void(const std::string&)>& progress = {});

}  // namespace mpb::selftest
