// summary.convergence of a cell file (docs/RESULTS.md): reads the repeats of
// a cell and of its baseline, asks runner/measure/convergence_verdict.h for
// the verdict and the time to target, and writes them as JSON. Also the
// experiment's `convergence:` settings as the cell file keeps them.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "config/cell_config.h"
#include "runner/measure/convergence_verdict.h"

namespace mpb {

// The cell file's "convergence_settings" ({margin: number|null, metric, alpha}).
nlohmann::json convergence_settings_json(const ConvergenceSettings& settings);
// Back; a file from before the key (or without it) gets the defaults.
ConvergenceSettings convergence_settings_from(const nlohmann::json& cell);

// Each repeat of a cell file as the verdict sees it.
std::vector<SeedRun> seed_runs(const nlohmann::json& cell);

// Sets summary.convergence of `cell` against `baseline`: null when there is
// no baseline, or it trained another model or other data (config.model or
// config.data differ). The baseline itself is judged against itself and
// gets verdict "baseline".
void apply_convergence(nlohmann::json& cell, const nlohmann::json* baseline);

// The cells judged against one baseline as one family (issue 40): Holm-adjusts
// their summary.convergence p values together (judge_family) and rewrites each
// verdict, reason, p_adjusted and family. Cells without a verdict, and the
// baseline, are left as they are. Call after apply_convergence on every cell.
void apply_convergence_family(const std::vector<nlohmann::json*>& cells);

}  // namespace mpb
