// The FP8 state of a model's linear layers under precision `fp8`
// (Transformer Engine's hybrid recipe): per linear layer three tensors, each
// with its own delayed scale (core/fp8_scaling.h):
//   input        E4M3   the layer's input (forward GEMM, weight-gradient GEMM)
//   weight       E4M3   its weight's compute copy (forward, input-gradient GEMM)
//   grad_output  E5M2   the gradient arriving at its output (both backward GEMMs)
// The scales, amaxes, histories and saturation counts live on the device,
// where the GEMMs read and write them (GemmFp8Operand) and update() turns one
// step's amaxes into the next step's scales (Device::fp8_update_scales), once
// per optimizer step and without a host wait, as Transformer Engine does.
//
// Layers are registered by their weight's address the first time a GEMM uses
// them, so slots follow the order of the first step's GEMMs ("linear0" is the
// first layer the forward pass runs); a tied weight is one layer.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device.h"
#include "core/fp8_scaling.h"

namespace mpb {

enum class Fp8Role { Input = 0, Weight = 1, GradOutput = 2 };

struct Fp8TensorReport {
  std::string name;           // "linear3.grad_output"
  const char* format;         // "e4m3" | "e5m2"
  float scale = 1.0f;         // the scale the last step used
  float amax = 0.0f;          // the last step's max |x|
  double saturated_fraction;  // of the elements the last step's GEMMs quantized
};

class Fp8Linears {
 public:
  static constexpr int kMaxLinears = 1024;  // BERT-large has 146
  static_assert(3 * kMaxLinears == Device::kFp8MaxSlots, "one update covers every slot");

  Fp8Linears(Device& dev, const Fp8Recipe& recipe);

  // The FP8 operand for `role` of the layer whose weight is at `weight`;
  // `elements` is how many values this GEMM quantizes (for the saturated fraction).
  GemmFp8Operand operand(const void* weight, Fp8Role role, int64_t elements);

  // After each optimizer step (applied or skipped), inside it: the step's
  // amaxes go into the histories and the next step's scales are computed on
  // the device; the amaxes and saturation counts are zeroed for the next
  // step. No host wait, unless `report`: then the step's scales, amaxes and
  // saturated fractions are read back first (three waits), for last_step().
  void update(bool report);

  // Forgets what GEMMs since the last update() recorded, keeping the scales
  // and histories: after an evaluation, whose forward passes are no step,
  // and after the trainer's warm-up. It also sizes the history for every
  // tensor registered so far, so that the update after it allocates nothing.
  void discard();

  // Every registered tensor as of the last update(true).
  const std::vector<Fp8TensorReport>& last_step() const { return report_; }

 private:
  int64_t slots() const { return static_cast<int64_t>(elements_.size()); }
  // Grows history_ to the registered slots (keeping what it holds).
  void reserve_history();

  Device* dev_;
  Fp8Recipe recipe_;
  DeviceBuffer scale_, amax_, saturated_, fp8_max_;  // [3 * kMaxLinears] float32, per slot 3 * layer + role
  DeviceBuffer steps_;                               // [3 * kMaxLinears] int32: updates each history holds
  DeviceBuffer history_;                             // [history_slots_, amax_history_len] float32
  int64_t history_slots_ = 0;
  std::unordered_map<const void*, int> layer_of_;
  std::vector<double> elements_;  // this step's quantized element count per slot
  std::vector<Fp8TensorReport> report_;
};

}  // namespace mpb
