#include "runner/experiment/run_plan.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "core/rng.h"

namespace mpb {

RunOrder parse_run_order(const std::string& name) {
  if (name == "interleaved") return RunOrder::Interleaved;
  if (name == "sequential") return RunOrder::Sequential;
  throw std::invalid_argument("order '" + name + "': expected interleaved or sequential");
}

const char* run_order_name(RunOrder order) { return order == RunOrder::Interleaved ? "interleaved" : "sequential"; }

size_t RunPlan::units() const {
  size_t n = 0;
  for (const auto& r : rounds) n += r.size();
  return n;
}

RunPlan make_run_plan(const std::vector<const Cell*>& cells, RunOrder order, uint64_t seed) {
  RunPlan plan;
  plan.order = order;
  plan.seed = seed;
  if (order == RunOrder::Sequential) {
    for (const Cell* c : cells) {
      std::vector<RunUnit> segment;
      for (int r = 0; r < c->config.repeats; ++r) segment.push_back({c, r});
      plan.rounds.push_back(std::move(segment));
    }
    return plan;
  }
  int rounds = 0;
  for (const Cell* c : cells) rounds = std::max(rounds, c->config.repeats);
  for (int r = 0; r < rounds; ++r) {
    std::vector<RunUnit> round;
    if (r % 2 == 1) {
      // Counterbalanced: an odd round runs the round before it backwards, so
      // every pair of cells runs in both orders and a position effect (the
      // second of two runs finds warm caches, a hotter CPU, a grown heap)
      // cancels out of their paired ratio instead of biasing it.
      const auto& previous = plan.rounds.back();
      for (auto u = previous.rbegin(); u != previous.rend(); ++u)
        if (r < u->cell->config.repeats) round.push_back({u->cell, r});
    } else {
      for (const Cell* c : cells)
        if (r < c->config.repeats) round.push_back({c, r});
      // Fisher-Yates with the project's own RNG: the same order on every machine.
      Rng rng(Rng::stream_seed(seed, uint64_t(r)));
      for (size_t i = round.size(); i > 1; --i) std::swap(round[i - 1], round[rng.below(i)]);
    }
    plan.rounds.push_back(std::move(round));
  }
  return plan;
}

nlohmann::json run_plan_json(const RunPlan& plan) {
  nlohmann::json rounds = nlohmann::json::array();
  for (const auto& round : plan.rounds) {
    nlohmann::json ids = nlohmann::json::array();
    for (const RunUnit& u : round) ids.push_back(u.cell->id);
    rounds.push_back(ids);
  }
  return {{"mode", run_order_name(plan.order)}, {"seed", plan.seed}, {"rounds", rounds}};
}

}  // namespace mpb
