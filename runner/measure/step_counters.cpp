#include "runner/measure/step_counters.h"

#include <algorithm>
#include <string>

namespace mpb {

namespace {

// "cudnn_sdpa", or "cudnn_sdpa+cuda_kernel" when calls went both ways; null
// when the model ran no fused attention (the MLP, fusion off).
nlohmann::json attention_impl_name(const nlohmann::json& calls) {
  std::string name;
  for (const auto& [impl, n] : calls.items())
    if (n.get<int64_t>() > 0) name += (name.empty() ? "" : "+") + impl;
  return name.empty() ? nlohmann::json(nullptr) : nlohmann::json(name);
}

}  // namespace

void add_step_counters(nlohmann::json& j, const RunRecord& rec, int warmup_steps) {
  int64_t syncs = 0, probed_syncs = -1, allocs = 0, plans = 0;
  const size_t first = static_cast<size_t>(std::max(0, warmup_steps));
  for (size_t i = first; i < rec.host_syncs.size(); ++i) {
    const bool probed = i < rec.probed.size() && rec.probed[i] != 0;
    if (probed) probed_syncs = std::max(probed_syncs, rec.host_syncs[i]);
    else syncs = std::max(syncs, rec.host_syncs[i]);
    allocs += rec.allocs[i];
    plans += rec.plans_created[i];
  }
  j["host_syncs_per_step"] = syncs;
  j["host_syncs_per_probed_step"] = probed_syncs < 0 ? nlohmann::json(nullptr) : nlohmann::json(probed_syncs);
  j["allocs_in_timed_steps"] = allocs;
  j["plans_created_in_timed_steps"] = plans;
  j["gemm_fallbacks"] = nlohmann::json(rec.gemm_fallbacks);
  j["attention_impl_calls"] = nlohmann::json(rec.attention_impls);
  j["attention_impl"] = attention_impl_name(j["attention_impl_calls"]);
  j["step_counters"] = {{"host_syncs", rec.host_syncs}, {"allocs", rec.allocs}, {"plans_created", rec.plans_created}};
}

void add_step_counter_summary(nlohmann::json& s, const std::vector<nlohmann::json>& repeats) {
  nlohmann::json syncs = nullptr, allocs = nullptr, plans = nullptr;
  nlohmann::json fallbacks = nlohmann::json::object(), attention = nlohmann::json::object();
  for (const nlohmann::json& r : repeats) {
    if (!r.contains("host_syncs_per_step")) continue;  // a repeat from before the counters
    const int64_t rs = r.at("host_syncs_per_step").get<int64_t>();
    syncs = syncs.is_null() ? rs : std::max(syncs.get<int64_t>(), rs);
    allocs = (allocs.is_null() ? 0 : allocs.get<int64_t>()) + r.at("allocs_in_timed_steps").get<int64_t>();
    plans = (plans.is_null() ? 0 : plans.get<int64_t>()) + r.at("plans_created_in_timed_steps").get<int64_t>();
    for (const auto& [name, n] : r.at("gemm_fallbacks").items())
      fallbacks[name] = fallbacks.value(name, int64_t{0}) + n.get<int64_t>();
    if (r.contains("attention_impl_calls"))  // from before this field: skipped
      for (const auto& [impl, n] : r.at("attention_impl_calls").items())
        attention[impl] = attention.value(impl, int64_t{0}) + n.get<int64_t>();
  }
  s["host_syncs_per_step"] = syncs;
  s["allocs_in_timed_steps"] = allocs;
  s["plans_created_in_timed_steps"] = plans;
  s["gemm_fallbacks"] = fallbacks;
  s["attention_impl_calls"] = attention;
  s["attention_impl"] = attention_impl_name(attention);
}

}  // namespace mpb
