#include "runner/experiment/convergence_settings.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include "config/config_errors.h"

namespace mpb {

namespace {

[[noreturn]] void fail(const std::string& file, const YAML::Mark& mark, const std::string& key,
                       const std::string& message) {
  throw ConfigError(file, mark.line + 1, mark.column + 1, key, message);
}

// A finite number in (lo, hi), or [lo, hi) with lo_allowed, as the whole of the scalar's text.
double parse_in_range(const std::string& file, const YAML::Node& node, const std::string& key, double lo,
                      bool lo_allowed, double hi, const char* range) {
  const std::string what = std::string("a number in ") + range;
  if (!node.IsScalar()) fail(file, node.Mark(), key, "expected " + what + ", got a " + (node.IsMap() ? "map" : "list"));
  const std::string& text = node.Scalar();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
    fail(file, node.Mark(), key, "expected " + what + ", got '" + text + "'");
  if (!((v > lo || (lo_allowed && v == lo)) && v < hi)) fail(file, node.Mark(), key, "expected " + what + ", got " + text);
  return v;
}

}  // namespace

ConvergenceSettings parse_convergence_settings(const YAML::Node& value, const std::string& file) {
  ConvergenceSettings s;
  if (value.IsNull()) return s;  // "convergence:" with everything commented out
  if (!value.IsMap())
    fail(file, value.Mark(), "convergence", "expected a map like {margin: 0.01, metric: eval_loss, alpha: 0.05}");
  static const std::vector<std::string> kKeys = {"margin", "margin_abs", "metric", "alpha", "max_skipped_fraction"};
  std::set<std::string> seen;
  for (auto it = value.begin(); it != value.end(); ++it) {
    const YAML::Node k = it->first, v = it->second;
    const std::string name = k.IsScalar() ? k.Scalar() : "";
    const std::string path = "convergence." + name;
    if (!k.IsScalar()) fail(file, k.Mark(), "convergence", "expected a key name");
    if (!seen.insert(name).second) fail(file, k.Mark(), path, "duplicate key");
    // Two margins would leave it unclear which one was fixed in advance.
    if ((name == "margin" && seen.count("margin_abs")) || (name == "margin_abs" && seen.count("margin")))
      fail(file, k.Mark(), path, "give either convergence.margin (relative) or convergence.margin_abs, not both");
    const YAML::Mark where = v.IsNull() ? k.Mark() : v.Mark();
    if (v.IsNull()) fail(file, where, path, "expected a value");
    if (name == "margin") {
      // A fraction of the baseline's mean final metric; 1 or more would call anything equivalent.
      s.margin = parse_in_range(file, v, path, 0.0, false, 1.0, "(0, 1)");
    } else if (name == "margin_abs") {
      // In the metric's own units (nats for eval_loss); any positive finite number.
      s.margin_abs = parse_in_range(file, v, path, 0.0, false, HUGE_VAL, "(0, inf)");
    } else if (name == "alpha") {
      // Each one-sided test's level; 0.5 or more would reject on a coin flip.
      s.alpha = parse_in_range(file, v, path, 0.0, false, 0.5, "(0, 0.5)");
    } else if (name == "max_skipped_fraction") {
      // 0: no skip beyond the baseline's; 1 would let a cell skip every step.
      s.max_skipped_fraction = parse_in_range(file, v, path, 0.0, true, 1.0, "[0, 1)");
    } else if (name == "metric") {
      if (!v.IsScalar() || (v.Scalar() != "eval_loss" && v.Scalar() != "eval_accuracy"))
        fail(file, where, path,
             unknown_name_message("value", v.IsScalar() ? v.Scalar() : "?", {"eval_loss", "eval_accuracy"}));
      s.metric = v.Scalar();
    } else {
      fail(file, k.Mark(), path, unknown_name_message("key", name, kKeys));
    }
  }
  return s;
}

}  // namespace mpb
