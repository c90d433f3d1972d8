// The experiment file's `convergence:` key (docs/CONFIG.md): how each cell's
// training is judged against the baseline's (summary.convergence,
// runner/measure/convergence_verdict.h).
//
//   convergence: {margin: 0.01, metric: eval_loss, alpha: 0.05, max_skipped_fraction: 0.01}
//
// Every key is optional; an empty or absent `convergence:` keeps the defaults
// of ConvergenceSettings (config/cell_config.h).
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

#include "config/cell_config.h"

namespace mpb {

// `value` is the top-level entry's value node; `file` names the file in
// messages. Throws ConfigError naming file:line:col and the dotted key
// ("convergence.alpha") for anything that is not a map of the five keys with
// valid values: margin a number in (0, 1) or margin_abs a positive number
// (not both), alpha a number in (0, 0.5), metric
// eval_loss or eval_accuracy, max_skipped_fraction a number in [0, 1).
ConvergenceSettings parse_convergence_settings(const YAML::Node& value, const std::string& file);

}  // namespace mpb
