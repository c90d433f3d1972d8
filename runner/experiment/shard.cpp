#include "runner/experiment/shard.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <stdexcept>

#include "train/cell_factory.h"

namespace mpb {

std::optional<ShardSpec> parse_shard(const std::string& text, std::string* error) {
  const size_t slash = text.find('/');
  auto number = [](const std::string& s, long* out) {
    if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    *out = std::stol(s);
    return true;
  };
  long i = 0, n = 0;
  if (slash == std::string::npos || !number(text.substr(0, slash), &i) || !number(text.substr(slash + 1), &n)) {
    *error = "--shard '" + text + "': expected I/N, two whole numbers (0 <= I < N), e.g. 0/4";
    return std::nullopt;
  }
  if (n < 1) {
    *error = "--shard '" + text + "': N, the number of shards, must be >= 1";
    return std::nullopt;
  }
  if (i >= n) {
    *error = "--shard '" + text + "': the index counts from 0 and must be below the number of shards (0/" +
             std::to_string(n) + " to " + std::to_string(n - 1) + "/" + std::to_string(n) + ")";
    return std::nullopt;
  }
  return ShardSpec{int(i), int(n)};
}

double shard_weight(const CellConfig& cfg) {
  // At least one FLOP a step: a weight of 0 would let any number of cells
  // pile onto one shard.
  return std::max(1.0, cell_step_flops(cfg).hardware()) * double(cfg.steps) * double(cfg.repeats);
}

ShardAssignment assign_shards(const std::vector<const Cell*>& cells, int count) {
  if (count < 1) throw std::invalid_argument("the number of shards must be at least 1");
  if (cells.size() < size_t(count))
    throw std::invalid_argument("the matrix has " + std::to_string(cells.size()) + " cell(s) to run, fewer than " +
                                std::to_string(count) + " shards: use at most " + std::to_string(cells.size()) +
                                " shards");
  ShardAssignment a;
  a.owner.assign(cells.size(), -1);
  a.needs_baseline.assign(size_t(count), false);
  a.weight.assign(size_t(count), 0.0);
  std::vector<size_t> owned(size_t(count), 0);
  const Cell* baseline = nullptr;
  for (size_t i = 0; i < cells.size(); ++i)
    if (cells[i]->is_baseline) {
      baseline = cells[i];
      a.owner[i] = 0;
      a.needs_baseline[0] = true;
      a.weight[0] = shard_weight(baseline->config);
      owned[0] = 1;
    }
  std::vector<size_t> order;
  for (size_t i = 0; i < cells.size(); ++i)
    if (a.owner[i] < 0) order.push_back(i);
  std::vector<double> w(cells.size());
  for (size_t i = 0; i < cells.size(); ++i) w[i] = shard_weight(cells[i]->config);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return w[x] > w[y]; });
  size_t left = order.size();
  for (size_t i : order) {
    const size_t empty = size_t(std::count(owned.begin(), owned.end(), size_t(0)));
    const bool wants_baseline = baseline && cells[i]->config.model.kind == baseline->config.model.kind;
    int best = -1;
    double best_weight = 0;
    for (int s = 0; s < count; ++s) {
      if (left <= empty && owned[size_t(s)] != 0) continue;  // keep no share empty
      const double extra = wants_baseline && !a.needs_baseline[size_t(s)] ? shard_weight(baseline->config) : 0.0;
      const double after = a.weight[size_t(s)] + w[i] + extra;
      if (best < 0 || after < best_weight) {
        best = s;
        best_weight = after;
      }
    }
    a.owner[i] = best;
    a.weight[size_t(best)] = best_weight;
    if (wants_baseline) a.needs_baseline[size_t(best)] = true;
    ++owned[size_t(best)];
    --left;
  }
  return a;
}

std::vector<const Cell*> ShardShare::to_run() const {
  std::vector<const Cell*> cells;
  if (baseline_copy) cells.push_back(baseline_copy);
  cells.insert(cells.end(), owned.begin(), owned.end());
  return cells;
}

ShardShare shard_share(const std::vector<const Cell*>& cells, const ShardSpec& spec) {
  const ShardAssignment a = assign_shards(cells, spec.count);
  ShardShare share;
  share.spec = spec;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (a.owner[i] == spec.index) share.owned.push_back(cells[i]);
    else if (cells[i]->is_baseline && a.needs_baseline[size_t(spec.index)]) share.baseline_copy = cells[i];
  }
  share.weight = a.weight[size_t(spec.index)];
  share.total_weight = std::accumulate(a.weight.begin(), a.weight.end(), 0.0);
  return share;
}

nlohmann::json shard_json(const ShardShare& share, const std::string& filter) {
  nlohmann::json owned = nlohmann::json::array();
  for (const Cell* c : share.owned) owned.push_back(c->id);
  return {{"index", share.spec.index},
          {"count", share.spec.count},
          {"cells", owned},
          {"baseline_copy", share.baseline_copy ? nlohmann::json(share.baseline_copy->id) : nlohmann::json(nullptr)},
          {"filter", filter},
          {"weight", share.weight},
          {"total_weight", share.total_weight},
          {"weight_rule", "GEMM FLOPs per step (checkpointing's recomputation included) x steps x repeats; "
                          "baseline copies counted in the shards that run them"}};
}

nlohmann::json scheduler_environment_json() {
  nlohmann::json env = nlohmann::json::object();
  for (const char* name : {"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT",
                           "SLURM_RESTART_COUNT", "SLURM_JOB_NODELIST", "SLURMD_NODENAME", "SLURM_CLUSTER_NAME",
                           "SLURM_JOB_PARTITION", "JOB_COMPLETION_INDEX", "HOSTNAME"})
    if (const char* v = std::getenv(name)) env[name] = v;
  return env;
}

std::string shard_dir_name(const std::string& experiment, const ShardSpec& spec) {
  return experiment + ".shard-" + std::to_string(spec.index) + "-of-" + std::to_string(spec.count);
}

}  // namespace mpb
