#include "runner/results/run_identity.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <random>

#include "runner/io/atomic_file.h"

namespace fs = std::filesystem;

namespace mpb {

std::string new_run_id() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
  std::random_device device;  // the OS's entropy: two runners started together still differ
  const uint64_t bits = (uint64_t(device()) << 32) ^ uint64_t(device());
  char id[64];
  std::snprintf(id, sizeof id, "%s-%016llx", when, static_cast<unsigned long long>(bits));
  return id;
}

std::string recorded_run_id(const nlohmann::json& manifest) {
  if (!manifest.is_object() || !manifest.contains("run_id") || !manifest.at("run_id").is_string()) return "";
  return manifest.at("run_id").get<std::string>();
}

namespace {

std::string quoted(const nlohmann::json& v) { return v.is_string() ? "'" + v.get<std::string>() + "'" : v.dump(); }

std::string ids_text(const std::vector<std::string>& ids) {
  if (ids.empty()) return "none (a set from before run ids)";
  std::string out = ids.size() > 1 ? "one of " : "";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", '" : "'") + ids[i] + "'";
  return out;
}

}  // namespace

std::string stranger_reason(const nlohmann::json& file, const RunMembership& run) {
  if (!file.is_object()) return "not a JSON object";
  // Partial sidecars and failed records of older runners carry no experiment;
  // their run id (below) still decides.
  if (file.contains("experiment") && file.at("experiment") != nlohmann::json(run.experiment))
    return "experiment " + quoted(file.at("experiment")) + ", this run's is '" + run.experiment + "'";
  if (!file.contains("run_id")) {
    if (run.accept_missing_id) return "";
    return "no run_id, this run's is " + ids_text(run.run_ids);
  }
  const nlohmann::json& id = file.at("run_id");
  for (const std::string& mine : run.run_ids)
    if (id == nlohmann::json(mine)) return "";
  return "run_id " + quoted(id) + ", this run's is " + ids_text(run.run_ids);
}

std::vector<std::string> stranger_files(const fs::path& dir, const RunMembership& run,
                                        const std::set<std::string>& leaving) {
  std::vector<std::string> out;
  for (const char* sub : {"cells", "partial", "failed"}) {
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(dir / sub, ec))) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir / sub, ec))
      if (entry.path().extension() == ".json" && fs::is_regular_file(entry.symlink_status(ec)) &&
          !leaving.count(std::string(sub) + "/" + entry.path().filename().string()))
        files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& path : files) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(read_file(path.string()));
      } catch (const std::exception&) {
        continue;
      }
      if (std::string why = stranger_reason(j, run); !why.empty()) out.push_back(path.string() + ": " + why);
    }
  }
  return out;
}

}  // namespace mpb
