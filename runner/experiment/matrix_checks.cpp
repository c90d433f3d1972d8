#include "runner/experiment/matrix_checks.h"

#include <algorithm>
#include <map>
#include <set>

#include "config/config_errors.h"
#include "core/precision.h"

namespace mpb {

using schema::join;

namespace {

// What a user types for a 16-bit dtype (core/precision.cpp's dtype names), and the
// autocast mode it is usually a slip for.
const std::map<std::string, std::string>& bare_16bit() {
  static const std::map<std::string, std::string> names = {
      {"bf16", "amp_bf16"}, {"bfloat16", "amp_bf16"}, {"fp16", "amp_fp16"},
      {"f16", "amp_fp16"},  {"float16", "amp_fp16"},  {"half", "amp_fp16"}};
  return names;
}

// fp32 master weights with 16-bit compute: amp_bf16, amp_fp16, O1, fp8 (not O2/O3,
// whose parameters are 16-bit themselves).
bool is_autocast(const std::string& precision) {
  try {
    const PrecisionPolicy p = resolve_policy(precision);
    return p.param == DType::F32 && p.compute != DType::F32;
  } catch (const std::invalid_argument&) {
    return false;  // the loader reports an unknown precision itself
  }
}

std::string pattern_text(const Pattern& p) {
  std::vector<std::string> terms;
  for (const auto& [key, value] : p) terms.push_back(key + ": " + value);
  return "{" + join(terms, ", ") + "}";
}

}  // namespace

void check_precision_axis(const std::string& file, const Axis& axis) {
  const auto autocast = std::find_if(axis.values.begin(), axis.values.end(),
                                     [](const Assignment& a) { return is_autocast(a.canonical); });
  if (autocast == axis.values.end()) return;
  for (const Assignment& a : axis.values) {
    const auto it = bare_16bit().find(a.canonical);
    if (it == bare_16bit().end()) continue;
    const std::string dtype = it->second.substr(4);  // "bf16" or "fp16"
    throw ConfigError(file, a.origin.where.line, a.origin.where.col, a.origin.path,
                      "'" + a.canonical + "' is pure " + dtype + " (parameters, gradients and activations in " +
                          dtype + ", no fp32 master weights), not autocast; beside " + autocast->canonical +
                          " in this list it is most likely meant as " + it->second +
                          ". Write " + it->second + ", or for pure " + dtype +
                          " next to autocast the policy string params=" +
                          (dtype == "bf16" ? "bfloat16,compute=bfloat16" : "float16,compute=float16"));
  }
}

void check_excludes_match(const std::string& file, const std::vector<Pattern>& excludes,
                          const std::vector<Where>& excludes_at, const std::vector<Cell>& product) {
  // The values each key takes in the product, for every key an exclude names: then an
  // entry matches a cell iff some cell has all of its values at once, checked per group
  // of entries with the same keys (one pass over the cells per group).
  std::map<std::vector<std::string>, std::set<std::vector<std::string>>> seen;  // sorted keys -> value rows
  std::map<std::string, std::set<std::string>> values_of;
  for (const Pattern& p : excludes) {
    std::vector<std::string> keys;
    for (const auto& term : p) keys.push_back(term.first);
    std::sort(keys.begin(), keys.end());
    seen.emplace(keys, std::set<std::vector<std::string>>{});
  }
  for (const Cell& cell : product) {
    for (auto& [keys, rows] : seen) {
      std::vector<std::string> row;
      for (const std::string& k : keys) {
        row.push_back(cell_value_string(cell, k));
        values_of[k].insert(row.back());
      }
      rows.insert(std::move(row));
    }
  }
  for (size_t i = 0; i < excludes.size(); ++i) {
    Pattern sorted = excludes[i];
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::string> keys, row;
    for (const auto& [k, v] : sorted) keys.push_back(k), row.push_back(v);
    if (seen[keys].count(row)) continue;
    std::vector<std::string> why;
    for (const auto& [k, v] : sorted)
      if (!values_of[k].count(v))
        why.push_back(k + " is never " + v + " (its values: " +
                      join(std::vector<std::string>(values_of[k].begin(), values_of[k].end()), ", ") + ")");
    const Where at = i < excludes_at.size() ? excludes_at[i] : Where{};
    throw ConfigError(file, at.line, at.col, "exclude[" + std::to_string(i) + "]",
                      pattern_text(excludes[i]) + " matches none of the matrix's " + std::to_string(product.size()) +
                          " cells, so it excludes nothing: " +
                          (why.empty() ? std::string("no cell has all these values at once") : join(why, "; ")) +
                          ". A typo in a value, or an axis value renamed?");
  }
}

}  // namespace mpb
