// The step counters of a run (train/trainer.h RunRecord: host syncs,
// allocations and GEMM plans per step; GEMM epilogue fallbacks) as the cell
// JSON's fields (docs/RESULTS.md): per repeat, and summed over repeats.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "train/trainer.h"

namespace mpb {

// Adds to a repeat's JSON: host_syncs_per_step (the most over the unprobed
// steps after the configured warm-up), host_syncs_per_probed_step (the same
// over probed steps; null without), allocs_in_timed_steps and
// plans_created_in_timed_steps (sums over every step after warm-up, probed
// ones included), gemm_fallbacks ({epilogue: calls}, the whole run),
// attention_impl_calls ({implementation: fused attention calls}, the whole
// run: cudnn_sdpa, cuda_kernel, cpu_kernel) and attention_impl (their names
// joined by "+", null without fused attention), and step_counters (the
// per-step arrays, warm-up steps included).
void add_step_counters(nlohmann::json& repeat, const RunRecord& rec, int warmup_steps);

// Adds the same four scalar fields, gemm_fallbacks and the attention fields
// (summed over repeats) to a cell's summary:
// the most host syncs per step of any repeat, the sums of the rest. Repeats
// written before these fields existed are skipped; with none left the fields
// are null.
void add_step_counter_summary(nlohmann::json& summary, const std::vector<nlohmann::json>& repeats);

}  // namespace mpb
