#include "runner/commands/merge.h"

#include "runner/commands/cli_text.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "runner/io/atomic_file.h"
#include "runner/results/merge_paths.h"
#include "runner/experiment/config.h"
#include "runner/results/convergence_json.h"
#include "runner/results/manifest.h"
#include "runner/results/results.h"
#include "runner/commands/run_experiment.h"
#include "runner/results/run_identity.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mpb {

namespace {

struct Shard {
  fs::path dir;
  json manifest;
  int index = 0, count = 0;
  std::vector<std::string> owned;  // the cells this shard's results stand for
  std::string baseline_copy;       // the baseline it ran only for its speed-ups; empty: none
  std::string name() const {
    return "shard " + std::to_string(index) + "/" + std::to_string(count) + " (" + dir.string() + ")";
  }
};

json read_json_file(const fs::path& path) {
  std::string text;
  try {
    text = read_file(path.string());
  } catch (const std::exception& e) {
    throw MergeError(path.string() + ": cannot read it: " + e.what());
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw MergeError(path.string() + ": not valid JSON: " + e.what());
  }
}

Shard read_shard(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw MergeError(dir.string() + ": no such directory");
  const fs::path path = dir / "manifest.json";
  if (!fs::exists(path))
    throw MergeError(path.string() + ": not found (each DIR is one shard's run directory, "
                                     "<out>/<name>.shard-I-of-N, holding manifest.json)");
  Shard s;
  s.dir = dir;
  s.manifest = read_json_file(path);
  const json& m = s.manifest;
  if (!m.is_object() || !m.contains("shard") || !m.at("shard").is_object())
    throw MergeError(path.string() + ": no \"shard\" in it: this run was not one of N shards (runner --shard I/N)");
  try {
    const json& sh = m.at("shard");
    s.index = sh.at("index").get<int>();
    s.count = sh.at("count").get<int>();
    s.owned = sh.at("cells").get<std::vector<std::string>>();
    if (!sh.at("baseline_copy").is_null()) s.baseline_copy = sh.at("baseline_copy").get<std::string>();
    (void)m.at("experiment").get<std::string>();
    (void)m.at("cells").get<std::vector<std::string>>();
    (void)m.at("cell_config_hashes").get<std::map<std::string, std::string>>();
  } catch (const json::exception& e) {
    throw MergeError(path.string() + ": " + e.what());
  }
  if (s.count < 1 || s.index < 0 || s.index >= s.count)
    throw MergeError(path.string() + ": shard.index " + std::to_string(s.index) + " of shard.count " +
                     std::to_string(s.count) + " is out of range");
  if (!m.contains("finished") || m.at("finished").is_null())
    throw MergeError(s.name() + " did not finish (manifest.finished is null): run it again with --resume, then merge");
  return s;
}

std::string field_text(const json& m, const std::string& dotted) {
  const json* node = &m;
  size_t start = 0;
  for (;;) {
    const size_t dot = dotted.find('.', start);
    const std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(key)) return "(not recorded)";
    node = &node->at(key);
    if (dot == std::string::npos) return node->is_string() ? node->get<std::string>() : node->dump();
    start = dot + 1;
  }
}

// compare.py's machine identity (scripts/mpbench_resultset.py): device kind, name, GPU name.
std::vector<std::string> machine_identity(const json& manifest) {
  const json device = manifest.value("device", json::object());
  const json gpu = device.is_object() ? device.value("gpu", json()) : json();
  auto text = [](const json& o, const char* key) {
    return o.is_object() && o.contains(key) && o.at(key).is_string() ? o.at(key).get<std::string>() : std::string();
  };
  return {text(device, "kind"), text(device, "name"), text(gpu, "name")};
}

std::string machine_label(const std::vector<std::string>& identity) {
  for (size_t i = identity.size(); i-- > 0;)
    if (!identity[i].empty()) return identity[i];
  return "unknown machine";
}

// The shards' values of one manifest field: the value when they agree; for
// objects, key by key; else null, with the field's path added to `differing`.
json agreeing(const std::vector<const json*>& values, const std::string& path, std::vector<std::string>* differing) {
  const json& first = *values.front();
  if (std::all_of(values.begin(), values.end(), [&](const json* v) { return *v == first; })) return first;
  if (std::all_of(values.begin(), values.end(), [](const json* v) { return v->is_object(); })) {
    std::set<std::string> keys;
    for (const json* v : values)
      for (auto it = v->begin(); it != v->end(); ++it) keys.insert(it.key());
    json out = json::object();
    for (const std::string& k : keys) {
      std::vector<const json*> sub;
      static const json kAbsent;
      for (const json* v : values) sub.push_back(v->contains(k) ? &v->at(k) : &kAbsent);
      out[k] = agreeing(sub, path + "." + k, differing);
    }
    return out;
  }
  differing->push_back(path);
  return nullptr;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

namespace {
MergedSet merge_checked(const std::vector<fs::path>& dirs, const MergeOptions& opt);
}  // namespace

MergedSet merge_shards(const std::vector<fs::path>& dirs, const MergeOptions& opt) {
  // A field of an edited or foreign manifest that is not what the runner
  // writes (a string where a list is) is bad input, not a crash.
  try {
    return merge_checked(dirs, opt);
  } catch (const json::exception& e) {
    throw MergeError(std::string("a shard's manifest.json or cell file has an unexpected shape: ") + e.what());
  }
}

namespace {

// Shards 0..N-1 of one experiment, each once, in index order.
std::vector<const Shard*> shards_in_order(const std::vector<Shard>& given) {
  const Shard& ref = given.front();
  const std::string experiment = ref.manifest.at("experiment").get<std::string>();
  for (const Shard& s : given) {
    if (s.manifest.at("experiment") != experiment)
      throw MergeError(s.name() + " ran experiment '" + s.manifest.at("experiment").get<std::string>() + "', " +
                       ref.name() + " ran '" + experiment + "': one merge is one experiment (--allow-mixed does not "
                       "change that)");
    if (s.count != ref.count)
      throw MergeError(s.name() + " is one of " + std::to_string(s.count) + " shards, " + ref.name() + " one of " +
                       std::to_string(ref.count) + ": shares of different splits overlap");
    if (field_text(s.manifest, "shard.filter") != field_text(ref.manifest, "shard.filter"))
      throw MergeError(s.name() + " ran with --filter '" + field_text(s.manifest, "shard.filter") + "', " +
                       ref.name() + " with '" + field_text(ref.manifest, "shard.filter") + "'");
  }
  std::vector<const Shard*> by_index(size_t(ref.count), nullptr);
  for (const Shard& s : given) {
    if (by_index[size_t(s.index)])
      throw MergeError("shard " + std::to_string(s.index) + "/" + std::to_string(s.count) + " is given twice: " +
                       by_index[size_t(s.index)]->dir.string() + " and " + s.dir.string());
    by_index[size_t(s.index)] = &s;
  }
  std::vector<std::string> absent;
  for (size_t i = 0; i < by_index.size(); ++i)
    if (!by_index[i]) absent.push_back(std::to_string(i) + "/" + std::to_string(ref.count));
  if (!absent.empty())
    throw MergeError("shard(s) " + join(absent, ", ") + " not given: a merge needs all " + std::to_string(ref.count) +
                     " shards (a shard's directory is <out>/" + experiment + ".shard-I-of-" +
                     std::to_string(ref.count) + ")");
  return by_index;
}

// Same configuration and code, or --allow-mixed and a record of what differed.
std::vector<std::string> mixed_builds(const std::vector<const Shard*>& shards, const MergeOptions& opt) {
  const Shard& first = *shards.front();
  std::vector<std::string> mixed;
  for (const char* key : {"config_hash", "git_commit", "git.dirty", "mpbench_version"})
    for (const Shard* s : shards)
      if (field_text(s->manifest, key) != field_text(first.manifest, key))
        mixed.push_back(std::string(key) + ": " + first.name() + " has " + field_text(first.manifest, key) + ", " +
                        s->name() + " has " + field_text(s->manifest, key));
  if (!mixed.empty() && !opt.allow_mixed)
    throw MergeError("the shards differ, so their cells would not be one experiment's:\n  " + join(mixed, "\n  ") +
                     "\n(--allow-mixed merges them anyway and records this in manifest.merged.mixed)");
  return mixed;
}

// The matrix (every shard's cells, first seen first) and the shard that owns each cell.
struct CellOwners {
  std::vector<std::string> matrix;
  std::map<std::string, const Shard*> owner;
};

CellOwners cell_owners(const std::vector<const Shard*>& shards) {
  CellOwners out;
  std::set<std::string> in_matrix;
  for (const Shard* s : shards)
    for (const auto& id : s->manifest.at("cells"))
      if (in_matrix.insert(id.get<std::string>()).second) out.matrix.push_back(id.get<std::string>());
  for (const Shard* s : shards)
    for (const std::string& id : s->owned) {
      if (!in_matrix.count(id))
        throw MergeError(s->name() + ": manifest.shard.cells names '" + id + "', which is not a cell of the matrix");
      if (out.owner.count(id))
        throw MergeError("cell '" + id + "' is in the shares of both " + out.owner[id]->name() + " and " + s->name() +
                         ": it would be counted twice");
      out.owner[id] = s;
    }
  return out;
}

// Cell `id`'s result (or failed/ record) from shard `s`, checked to be that
// cell's, with the owner's config hash, from that shard's run; nullopt with
// a line in `missing` where the shard has none.
std::optional<json> owned_cell_file(const Shard& s, const std::string& id, const std::string& experiment,
                                    bool* failed, std::vector<std::string>* missing) {
  const std::string want = s.manifest.at("cell_config_hashes").value(id, std::string());
  const fs::path cell_path = s.dir / "cells" / (cell_slug(id) + ".json");
  const fs::path failed_path = s.dir / "failed" / (cell_slug(id) + ".json");
  const fs::path path = fs::exists(cell_path) ? cell_path : failed_path;
  if (!fs::exists(path)) {
    missing->push_back("'" + id + "' has no result in " + s.name() + " (cells/" + cell_slug(id) +
                       ".json): run that shard again with --resume");
    return std::nullopt;
  }
  json j = read_json_file(path);
  if (!j.is_object() || j.value("cell_id", std::string()) != id || j.value("config_hash", std::string()) != want)
    throw MergeError(path.string() + ": not the result of cell '" + id + "' with config_hash " + want +
                     " (its manifest's): run that shard again with --resume (it moves such files to stale/)");
  // A file of another experiment or run with the same configuration (copied
  // in by hand) was measured against another baseline: never merged.
  const std::string shard_run = recorded_run_id(s.manifest);
  const std::string why =
      stranger_reason(j, RunMembership{experiment, shard_run.empty() ? std::vector<std::string>{}
                                                                      : std::vector<std::string>{shard_run},
                                       shard_run.empty()});
  if (!why.empty())
    throw MergeError(path.string() + ": not a result of " + s.name() + "'s run: " + why +
                     " (--allow-mixed does not change that: move the file away and run that shard again with "
                     "--resume)");
  *failed = path == failed_path;
  return j;
}

// Every cell of the matrix from exactly one shard into `out`; returns the
// cells' config hashes, each its owner's.
json collect_cells(const std::vector<const Shard*>& shards, const CellOwners& owners, MergedSet& out) {
  const Shard& first = *shards.front();
  const bool filtered = !field_text(first.manifest, "shard.filter").empty();
  std::vector<std::string> missing;
  if (!filtered)
    for (const std::string& id : owners.matrix)
      if (!owners.owner.count(id)) missing.push_back("'" + id + "' is in no shard's share");
  json hashes = first.manifest.at("cell_config_hashes");
  for (const std::string& id : owners.matrix) {
    auto it = owners.owner.find(id);
    if (it == owners.owner.end()) continue;
    hashes[id] = it->second->manifest.at("cell_config_hashes").value(id, std::string());
    bool failed = false;
    if (auto j = owned_cell_file(*it->second, id, out.experiment, &failed, &missing))
      (failed ? out.failed : out.cells).push_back(std::move(*j));
  }
  if (!missing.empty()) throw MergeError("cells missing from the merge:\n  " + join(missing, "\n  "));
  return hashes;
}

// The first shard's manifest with the merged set's run id, cells, time span,
// and the fields the shards agree on (null where they differ, listed in `differing`).
json merged_manifest_base(const std::vector<const Shard*>& shards, const CellOwners& owners, const json& hashes,
                          std::vector<std::string>* differing) {
  const Shard& first = *shards.front();
  json m = first.manifest;
  m.erase("shard");
  m["run_id"] = new_run_id();  // the merged set's own; each cell keeps its shard's (shards[].run_id)
  m["cells"] = owners.matrix;
  m["cell_config_hashes"] = hashes;
  std::string started = first.manifest.value("started", std::string()), finished;
  for (const Shard* s : shards) {
    started = std::min(started, s->manifest.value("started", started));
    finished = std::max(finished, s->manifest.value("finished", std::string()));
  }
  m["started"] = started;
  m["finished"] = finished;
  for (const char* key : {"config_hash", "git_commit", "git", "mpbench_version", "machine", "compiler", "build",
                          "libraries", "environment"}) {
    std::vector<const json*> values;
    static const json kAbsent;
    for (const Shard* s : shards) values.push_back(s->manifest.contains(key) ? &s->manifest.at(key) : &kAbsent);
    m[key] = agreeing(values, key, differing);
  }
  return m;
}

// One kind of machine: the best ceiling any shard measured, per mode (the
// field is the best of a run's measurements).
json best_ceilings(const std::vector<const Shard*>& shards) {
  json ceiling = json::object();
  for (const Shard* s : shards) {
    const json c = s->manifest.value("device", json::object()).value("ceiling_gflops", json::object());
    for (auto it = c.begin(); it != c.end(); ++it)
      if (it->is_number() && (!ceiling.contains(it.key()) || ceiling[it.key()].get<double>() < it->get<double>()))
        ceiling[it.key()] = *it;
  }
  return ceiling;
}

// Machines: compare.py's identity (device kind, name, GPU name) per shard,
// into m.machine.hostname and m.device; returns manifest.merged.machines.
json merge_machines(json& m, const std::vector<const Shard*>& shards, bool* mixed_machines) {
  std::map<std::vector<std::string>, std::vector<int>> machines;
  std::vector<std::vector<std::string>> machine_order;
  std::vector<std::string> hostnames;
  for (const Shard* s : shards) {
    const auto id = machine_identity(s->manifest);
    if (!machines.count(id)) machine_order.push_back(id);
    machines[id].push_back(s->index);
    const std::string host = field_text(s->manifest, "machine.hostname");
    if (std::find(hostnames.begin(), hostnames.end(), host) == hostnames.end()) hostnames.push_back(host);
  }
  if (m["machine"].is_object() && hostnames.size() > 1) m["machine"]["hostname"] = join(hostnames, ", ");
  json machines_json = json::array();
  std::vector<std::string> labels;
  for (const auto& id : machine_order) {
    std::vector<std::string> idx;
    for (int i : machines[id]) idx.push_back(std::to_string(i));
    labels.push_back(machine_label(id) + " (shard" + (idx.size() > 1 ? "s " : " ") + join(idx, ", ") + ")");
    machines_json.push_back({{"label", machine_label(id)}, {"identity", id}, {"shards", machines[id]}});
  }
  *mixed_machines = machine_order.size() > 1;
  if (*mixed_machines) {
    // No one device: the label names them all, and compare.py sees an
    // identity no single machine has.
    std::set<std::string> kinds;
    for (const auto& id : machine_order) kinds.insert(id[0]);
    m["device"] = {{"kind", kinds.size() == 1 ? *kinds.begin() : std::string("mixed")},
                   {"name", "mixed: " + join(labels, "; ")},
                   {"gpu", nullptr},
                   {"ceiling_gflops", json::object()},
                   {"mixed", true}};
  } else {
    m["device"]["ceiling_gflops"] = best_ceilings(shards);
  }
  return machines_json;
}

// Run order and machine load: each shard ran its own rounds at the same
// time as the others; the merged rounds list round r of every shard
// (baseline copies left out), the load windows carry their shard.
void merge_rounds_and_noise(json& m, const std::vector<const Shard*>& shards) {
  json rounds = json::array();
  json noise_rounds = json::array();
  json warnings = json::array();
  bool busy = false;
  for (const Shard* s : shards) {
    const json order = s->manifest.value("order", json::object());
    const json shard_rounds = order.value("rounds", json::array());
    for (size_t r = 0; r < shard_rounds.size(); ++r) {
      if (rounds.size() <= r) rounds.push_back(json::array());
      for (const auto& id : shard_rounds[r])
        if (id != s->baseline_copy) rounds[r].push_back(id);
    }
    const json noise = s->manifest.value("noise", json::object());
    for (json w : noise.value("rounds", json::array())) {
      w["shard"] = s->index;
      noise_rounds.push_back(w);
    }
    for (const auto& w : noise.value("warnings", json::array()))
      warnings.push_back("shard " + std::to_string(s->index) + " (" + field_text(s->manifest, "machine.hostname") +
                         "): " + w.get<std::string>());
    busy = busy || noise.value("busy", false);
  }
  if (m.contains("order") && m["order"].is_object()) m["order"]["rounds"] = rounds;
  if (m.contains("noise") && m["noise"].is_object()) {
    m["noise"]["rounds"] = noise_rounds;
    m["noise"]["warnings"] = warnings;
    m["noise"]["busy"] = busy;
  }
}

// manifest.shards: each shard's own record; a note per baseline copy left out.
json shard_records(const std::vector<const Shard*>& shards, std::vector<std::string>* notes) {
  json records = json::array();
  for (const Shard* s : shards) {
    const json& sm = s->manifest;
    json e = sm.at("shard");
    e["dir"] = fs::absolute(s->dir).lexically_normal().string();
    for (const char* key :
         {"run_id", "started", "finished", "config_hash", "git_commit", "machine", "device", "order", "noise"})
      if (sm.contains(key)) e[key] = sm.at(key);
    if (!s->baseline_copy.empty())
      notes->push_back("left out " + s->name() + "'s copy of the baseline " + s->baseline_copy +
                       " (it ran there for that shard's speed-ups; shard 0's is the merged one)");
    records.push_back(e);
  }
  return records;
}

MergedSet merge_checked(const std::vector<fs::path>& dirs, const MergeOptions& opt) {
  if (dirs.empty()) throw MergeError("no shard directories given");
  std::vector<Shard> given;
  for (const fs::path& d : dirs) given.push_back(read_shard(d));
  const std::vector<const Shard*> shards = shards_in_order(given);
  const Shard& first = *shards.front();
  const std::vector<std::string> mixed = mixed_builds(shards, opt);
  const CellOwners owners = cell_owners(shards);
  MergedSet out;
  out.experiment = first.manifest.at("experiment").get<std::string>();
  const json hashes = collect_cells(shards, owners, out);
  // Each shard judged its cells as a family of its own; the merged set is one family.
  std::vector<json*> family;
  for (json& c : out.cells) family.push_back(&c);
  apply_convergence_family(family);

  // The merged manifest: the first shard's, with what the shards agree on and
  // each shard's own record in "shards".
  std::vector<std::string> differing;
  json m = merged_manifest_base(shards, owners, hashes, &differing);
  bool mixed_machines = false;
  const json machines = merge_machines(m, shards, &mixed_machines);
  merge_rounds_and_noise(m, shards);
  json failed_cells = json::array();
  for (const json& f : out.failed) failed_cells.push_back(f);
  m["failed_cells"] = failed_cells;
  m["shards"] = shard_records(shards, &out.notes);
  json mixed_json = json::array();
  for (const std::string& x : mixed) mixed_json.push_back(x);
  m["merged"] = {{"tool", "runner merge"},
                 {"at", utc_now_iso8601()},
                 {"shards", first.count},
                 {"allow_mixed", opt.allow_mixed},
                 {"mixed", mixed_json},
                 {"differing_fields", differing},
                 {"mixed_machines", mixed_machines},
                 {"machines", machines},
                 {"filter", field_text(first.manifest, "shard.filter")},
                 {"speedups", "each cell's speed-up is against the baseline its own shard ran (same machine, same "
                              "rounds); the baseline cell's file is shard 0's"}};
  if (!opt.scheduler.is_null()) m["scheduler"] = opt.scheduler;
  out.manifest = std::move(m);
  return out;
}

// summary.csv's commit column: each cell keeps its shard's run id, and each
// shard's record (manifest.shards) its run id and commit.
CommitsByRun shard_commits(const json& manifest) {
  CommitsByRun commits;
  for (const json& s : manifest.value("shards", json::array())) {
    const json run = s.value("run_id", json()), commit = s.value("git_commit", json());
    if (run.is_string() && commit.is_string()) commits[run.get<std::string>()] = commit.get<std::string>();
  }
  return commits;
}

}  // namespace

fs::path write_merged_set(const fs::path& out_root, const MergedSet& set) {
  const fs::path target = out_root / set.experiment;
  if (fs::exists(target) && !(fs::is_directory(target) && fs::is_empty(target)))
    throw MergeError(target.string() + " exists and is not empty: a merge writes a new result set and never "
                     "replaces one (move it away, or give another OUT)");
  fs::create_directories(out_root);
  const fs::path tmp = out_root / ("." + set.experiment + ".merging-" + std::to_string(getpid()));
  fs::remove_all(tmp);  // this process's own leftover name: nobody else writes it
  fs::create_directories(tmp / "cells");
  for (const json& c : set.cells)
    write_file_atomic((tmp / "cells" / (cell_slug(c.at("cell_id").get<std::string>()) + ".json")).string(),
                      c.dump(1) + "\n");
  if (!set.failed.empty()) {
    fs::create_directories(tmp / "failed");
    for (const json& f : set.failed)
      write_file_atomic((tmp / "failed" / (cell_slug(f.at("cell_id").get<std::string>()) + ".json")).string(),
                        f.dump(1) + "\n");
  }
  write_file_atomic((tmp / "summary.csv").string(), summary_csv(set.cells, shard_commits(set.manifest)));
  write_file_atomic((tmp / "manifest.json").string(), set.manifest.dump(2) + "\n");
  if (fs::exists(target)) fs::remove(target);  // empty (checked above)
  fs::rename(tmp, target);
  return target;
}

int run_merge(int argc, char** argv) {
  CLI::App app{"runner merge: the result sets of an experiment's shards (runner --shard I/N) -> one result set, "
               "OUT/<name>/ (docs/SCALE.md)"};
  std::string out;
  std::vector<std::string> dirs;
  MergeOptions opt;
  std::string scheduler_file;
  bool quiet = false;
  app.add_option("out", out, "results root; the merged set goes to OUT/<experiment name>/, which must not exist; OUT may "
                 "not be an input, lie inside one, or hold one")
      ->required();
  app.add_option("dirs", dirs, "every shard's run directory (<out>/<name>.shard-I-of-N), all N of them")
      ->required();
  app.add_flag("--allow-mixed", opt.allow_mixed,
               "merge shards whose config hash, mpbench commit or version differ (recorded in manifest.merged.mixed)");
  app.add_option("--scheduler", scheduler_file,
                 "a JSON file of the scheduler's job states (scripts/slurm/job_states.py) for manifest.scheduler")
      ->type_name("FILE");
  app.add_flag("--quiet", quiet, "print only errors");
  use_runner_cli_text(app, "runner merge");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitBadInput;
  }
  try {
    if (!scheduler_file.empty()) opt.scheduler = read_json_file(scheduler_file);
    std::vector<fs::path> paths(dirs.begin(), dirs.end());
    if (const std::string conflict = merge_path_conflict(out, paths); !conflict.empty()) throw MergeError(conflict);
    const MergedSet set = merge_shards(paths, opt);
    const fs::path target = write_merged_set(out, set);
    if (!quiet) {
      for (const std::string& n : set.notes) std::printf("merge: %s\n", n.c_str());
      const json& merged = set.manifest.at("merged");
      std::printf("merge: %zu shard(s), %zu cell(s)%s of %s -> %s\n", dirs.size(), set.cells.size(),
                  set.failed.empty() ? "" : (" and " + std::to_string(set.failed.size()) + " hung").c_str(),
                  set.experiment.c_str(), target.string().c_str());
      if (merged.at("mixed_machines").get<bool>())
        std::printf("merge: the shards ran on different machines (%s): compare.py treats this set as a generation "
                    "comparison, never as a regression gate\n", set.manifest.at("device").at("name").get<std::string>().c_str());
      for (const auto& x : merged.at("mixed")) std::printf("merge: mixed (--allow-mixed): %s\n", x.get<std::string>().c_str());
    }
    return kExitOk;
  } catch (const MergeError& e) {
    std::fprintf(stderr, "error: merge: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: merge: %s\n", e.what());
    return kExitFailure;
  }
}

}  // namespace mpb
