// runner/measure/stats.h's t distribution and tests as JSON, for
// tests/numerics/test_stats_scipy.py (which compares them with scipy.stats;
// C++ cannot load that Python library).
//   stats_cases IN.json: IN holds {"cdf": [[t, df], ...], "ppf": [[p, df], ...],
//     "tests": [{"d": [...], "mu": m, "delta": d, "confidence": c}, ...],
//     optionally "fisher": [[x, n1, y, n2], ...] and "holm": [[p, ...], ...]};
//   prints {"cdf": [...], "ppf": [...], "tests": [{p_greater, p_less, t,
//     tost_lower, tost_upper, lo, hi}, ...], "fisher": [p, ...], "holm":
//     [[adjusted p (null for NaN), ...], ...]} on stdout. Exit 2 on a bad input.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "runner/measure/stats.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: stats_cases IN.json\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  nlohmann::json cases;
  try {
    cases = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "stats_cases: %s: %s\n", argv[1], e.what());
    return 2;
  }
  nlohmann::json out = {{"cdf", nlohmann::json::array()}, {"ppf", nlohmann::json::array()},
                        {"tests", nlohmann::json::array()}};
  for (const auto& c : cases.at("cdf")) out["cdf"].push_back(mpb::student_t_cdf(c.at(0), c.at(1)));
  for (const auto& c : cases.at("ppf")) out["ppf"].push_back(mpb::student_t_quantile(c.at(0), c.at(1)));
  for (const auto& c : cases.at("tests")) {
    const auto d = c.at("d").get<std::vector<double>>();
    const mpb::OneSampleT t = mpb::one_sample_t(d, c.at("mu").get<double>());
    const mpb::Tost tost = mpb::tost_paired(d, c.at("delta").get<double>());
    const mpb::MeanInterval ci = mpb::mean_interval(d, c.at("confidence").get<double>());
    out["tests"].push_back({{"t", t.t}, {"p_greater", t.p_greater}, {"p_less", t.p_less},
                            {"tost_lower", tost.p_lower}, {"tost_upper", tost.p_upper},
                            {"lo", ci.lo}, {"hi", ci.hi}});
  }
  out["fisher"] = nlohmann::json::array();
  for (const auto& c : cases.value("fisher", nlohmann::json::array()))
    out["fisher"].push_back(mpb::fisher_exact_greater(c.at(0), c.at(1), c.at(2), c.at(3)));
  out["holm"] = nlohmann::json::array();
  for (const auto& c : cases.value("holm", nlohmann::json::array())) {
    std::vector<double> p;
    for (const auto& x : c) p.push_back(x.is_number() ? x.get<double>() : NAN);
    nlohmann::json adjusted = nlohmann::json::array();
    for (double a : mpb::holm_adjust(p)) adjusted.push_back(std::isfinite(a) ? nlohmann::json(a) : nlohmann::json());
    out["holm"].push_back(adjusted);
  }
  std::cout << out.dump() << "\n";
  return 0;
}
