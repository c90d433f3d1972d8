// The runner binary end to end: the quickstart's files and fields, --resume,
// --dry-run, bad input, --device cuda without a GPU, and Ctrl-C.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Result {
  int code;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the runner with `args` (shell words), capturing stdout and stderr.
Result run(const std::string& args, const fs::path& tmp) {
  const fs::path out = tmp / "stdout.txt", err = tmp / "stderr.txt";
  std::string cmd = std::string(MPB_RUNNER_PATH) + " " + args + " >" + out.string() + " 2>" + err.string();
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("mpb_e2e_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

const std::string kQuickstart = std::string(MPB_SOURCE_DIR) + "/experiments/quickstart.yaml";

class QuickstartRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new fs::path(fresh_dir("quickstart"));
    result_ = new Result(run(kQuickstart + " --device cpu --out " + (*tmp_ / "results").string(), *tmp_));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*tmp_);
    delete tmp_;
    delete result_;
  }
  static fs::path dir() { return *tmp_ / "results" / "quickstart"; }
  static fs::path* tmp_;
  static Result* result_;
};
fs::path* QuickstartRun::tmp_ = nullptr;
Result* QuickstartRun::result_ = nullptr;

TEST_F(QuickstartRun, ExitsZeroAndPrintsTheTable) {
  ASSERT_EQ(result_->code, 0) << result_->err;
  EXPECT_NE(result_->out.find("samples/s"), std::string::npos);
  EXPECT_NE(result_->out.find("(baseline)"), std::string::npos);
  EXPECT_NE(result_->err.find("ETA"), std::string::npos) << "progress lines";
}

TEST_F(QuickstartRun, ManifestDescribesMachineAndCells) {
  ASSERT_EQ(result_->code, 0) << result_->err;
  json m = json::parse(slurp(dir() / "manifest.json"));
  EXPECT_EQ(m["schema"], "mpbench.manifest/1");
  EXPECT_EQ(m["experiment"], "quickstart");
  EXPECT_FALSE(m["finished"].is_null());
  for (const char* k : {"cpu_model", "cores", "os", "kernel", "memory_bytes"}) EXPECT_TRUE(m["machine"].contains(k)) << k;
  EXPECT_TRUE(m["libraries"].contains("onednn"));
  EXPECT_EQ(m["device"]["kind"], "cpu");
  EXPECT_GT(m["device"]["ceiling_gflops"]["fp32"].get<double>(), 0.0);
  EXPECT_GE(m["cells"].size(), 2u);
  EXPECT_EQ(m["config_hash"].get<std::string>().size(), 16u);
  // The run order and the machine's load, sampled before the run and after each round.
  EXPECT_EQ(m["order"]["mode"], "interleaved");
  EXPECT_EQ(m["order"]["rounds"].size(), 2u) << "two repeats: two rounds";
  EXPECT_EQ(m["order"]["rounds"][0].size(), m["cells"].size());
  EXPECT_TRUE(m["noise"]["before"].contains("other_cpu_fraction"));
  EXPECT_EQ(m["noise"]["rounds"].size(), 2u);
  EXPECT_TRUE(m["noise"]["busy"].is_boolean());
}

TEST_F(QuickstartRun, EveryCellHasItsMeasurements) {
  ASSERT_EQ(result_->code, 0) << result_->err;
  json m = json::parse(slurp(dir() / "manifest.json"));
  int baselines = 0;
  for (const auto& id : m["cells"]) {
    bool found = false;
    for (const auto& f : fs::directory_iterator(dir() / "cells")) {
      json c = json::parse(slurp(f.path()));
      if (c["cell_id"] != id) continue;
      found = true;
      EXPECT_EQ(c["schema"], "mpbench.cell/1");
      baselines += c["is_baseline"].get<bool>();
      const json& cfg = c["config"];
      const json& s = c["summary"];
      ASSERT_EQ(c["repeats"].size(), cfg["repeats"].get<size_t>());
      for (const auto& r : c["repeats"]) {
        const size_t steps = cfg["steps"].get<size_t>();
        for (const char* k : {"step_time_ms", "loss", "wall_time_s", "loss_scale", "skipped", "grad_norm"})
          EXPECT_EQ(r[k].size(), steps) << k;
        EXPECT_GT(r["peak_memory_bytes"]["params"].get<double>(), 0);
        EXPECT_GT(r["peak_memory_bytes"]["activations"].get<double>(), 0);
        // Loss really falls on the teacher task.
        EXPECT_LT(r["loss"].back().get<double>(), 0.8 * r["loss"].front().get<double>());
      }
      const json& t = s["step_time_ms"];
      EXPECT_LE(t["p10"].get<double>(), t["median"].get<double>());
      EXPECT_LE(t["median"].get<double>(), t["p90"].get<double>());
      EXPECT_GT(s["samples_per_s"].get<double>(), 0);
      // Speedups compare cells of the baseline's model only (the BERT cell has none),
      // with an interval (two repeats each) and a verdict.
      if (cfg["model"]["kind"] == "mlp") {
        EXPECT_GT(s["speedup"].get<double>(), 0);
        if (c["is_baseline"].get<bool>()) {
          EXPECT_EQ(s["speedup_verdict"], "baseline");
        } else {
          ASSERT_TRUE(s["speedup_interval"].is_object()) << id;
          EXPECT_LE(s["speedup_interval"]["lo"].get<double>(), s["speedup_interval"]["hi"].get<double>());
          EXPECT_NE(s["speedup_interval"]["method"].get<std::string>().find("paired"), std::string::npos)
              << "interleaved repeats pair by round";
          EXPECT_TRUE(s["speedup_verdict"].is_string());
        }
      } else {
        EXPECT_TRUE(s["speedup"].is_null());
        EXPECT_TRUE(s["speedup_interval"].is_null());
      }
      for (const char* k : {"cv", "robust_cv", "p90_over_median", "noisy", "reasons", "outlier_rule"})
        EXPECT_TRUE(s["noise"].contains(k)) << k;
      for (const auto& r : c["repeats"])
        for (const char* k : {"round", "position", "started", "started_s", "order", "ceiling_gflops"})
          EXPECT_TRUE(r.contains(k)) << k;
      EXPECT_GT(s["gflops"].get<double>(), 0);
      EXPECT_GT(s["ceiling_fraction"].get<double>(), 0);
      if (cfg["model"]["kind"] == "mlp") {
        EXPECT_GT(s["eval_accuracy"].get<double>(), 1.0 / cfg["data"]["classes"].get<double>());
      }
      const json& mem = s["peak_memory_bytes"];
      EXPECT_GE(mem["total"].get<double>(), mem["activations"].get<double>());
      // The time estimate (40% of the CPU's ceiling at start) beside the measured step time.
      const json& est = s["estimated_time"];
      EXPECT_EQ(est["basis"], "measured_ceiling");
      EXPECT_GT(est["seconds"].get<double>(), 0);
      EXPECT_GT(s["measured_time_s"].get<double>(), 0);
    }
    EXPECT_TRUE(found) << id;
  }
  EXPECT_EQ(baselines, 1);
}

TEST_F(QuickstartRun, SummaryCsvHasARowPerCell) {
  ASSERT_EQ(result_->code, 0) << result_->err;
  std::istringstream csv(slurp(dir() / "summary.csv"));
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("cell_id,is_baseline,axis.", 0), 0u) << header;
  EXPECT_NE(header.find("samples_per_s,speedup,speedup_lo,speedup_hi,speedup_verdict,step_ms_median"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find("step_cv,noisy"), std::string::npos) << header;
  // Each row names its machine and build, so sets of several machines concatenate without a join.
  const std::string machine = ",device,device_name,run_id,commit";
  EXPECT_EQ(header.substr(header.size() - std::min(header.size(), machine.size())), machine) << header;
  json m = json::parse(slurp(dir() / "manifest.json"));
  const std::string run_and_commit =
      "," + m["run_id"].get<std::string>() + "," + m["git_commit"].get<std::string>();
  int rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    EXPECT_NE(line.find(",cpu,"), std::string::npos) << line;
    EXPECT_EQ(line.substr(line.size() - std::min(line.size(), run_and_commit.size())), run_and_commit) << line;
  }
  EXPECT_EQ(rows, static_cast<int>(m["cells"].size()));
  for (const auto& f : fs::recursive_directory_iterator(dir())) EXPECT_NE(f.path().extension(), ".tmp");
}

TEST_F(QuickstartRun, ResumeSkipsFinishedCellsAndRerunsMissingOnes) {
  ASSERT_EQ(result_->code, 0) << result_->err;
  std::vector<fs::path> cells;
  for (const auto& f : fs::directory_iterator(dir() / "cells")) cells.push_back(f.path());
  std::sort(cells.begin(), cells.end());
  ASSERT_GE(cells.size(), 2u);
  const std::string kept = slurp(cells[0]);
  const std::string removed_name = cells[1].filename().string();
  fs::remove(cells[1]);
  Result r = run(kQuickstart + " --device cpu --resume --out " + (*tmp_ / "results").string(), *tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(cells[0]), kept) << "a finished cell was rewritten";
  EXPECT_TRUE(fs::exists(cells[1])) << removed_name << " was not re-run";
  EXPECT_NE(r.err.find("skipped (--resume)"), std::string::npos);
}

TEST(Runner, DryRunListsCellsAndWritesNothing) {
  fs::path tmp = fresh_dir("dry");
  Result r = run(kQuickstart + " --dry-run --out " + (tmp / "results").string(), tmp);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("precision=fp32"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "results"));
  fs::remove_all(tmp);
}

TEST(Runner, DryRunEstimatesEachCellAndTheTotalForAnAssumedGpu) {
  fs::path tmp = fresh_dir("estimate");
  Result r = run(kQuickstart + " --dry-run --assume-gpu rtx3090 --out " + (tmp / "results").string(), tmp);
  EXPECT_EQ(r.code, 0) << r.err;
  // The GPU step model (runner/measure/cost_estimate.h): GEMMs at a share of the mode's peak plus
  // the memory-bound rest at the bandwidth.
  EXPECT_NE(r.out.find("a step is GEMMs at 65% (16-bit)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("at the memory bandwidth (the H200-fitted step model), on GeForce RTX 3090"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("h:mm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<0:01"), std::string::npos) << r.out;  // the quickstart's cells take seconds on a 3090
  EXPECT_NE(r.out.find(" total "), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "results"));
  // An unknown name: exit 2, naming the known ones.
  r = run(kQuickstart + " --dry-run --assume-gpu rtx9090", tmp);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown GPU 'rtx9090'; known: h100-pcie, h100"), std::string::npos) << r.err;
  fs::remove_all(tmp);
}

TEST(Runner, BadConfigExitsTwoNamingFileLineAndKeyAndWritesNothing) {
  fs::path tmp = fresh_dir("bad");
  std::ofstream(tmp / "bad.yaml") << "name: bad\nsteps: 10\noptimizer:\n  lr: fast\n";
  Result r = run((tmp / "bad.yaml").string() + " --out " + (tmp / "results").string(), tmp);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.yaml:4:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("optimizer.lr"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "results"));
  fs::remove_all(tmp);
}

TEST(Runner, BadConfigLeavesEarlierResultsUntouched) {
  fs::path tmp = fresh_dir("keep");
  fs::create_directories(tmp / "results" / "bad");
  std::ofstream(tmp / "results" / "bad" / "summary.csv") << "earlier\n";
  std::ofstream(tmp / "bad.yaml") << "name: bad\nstepz: 10\n";
  Result r = run((tmp / "bad.yaml").string() + " --out " + (tmp / "results").string(), tmp);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did you mean 'steps'"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(tmp / "results" / "bad" / "summary.csv"), "earlier\n");
  fs::remove_all(tmp);
}

TEST(Runner, CudaWithoutAGpuSaysWhyInOneLineAndExitsNonZero) {
  fs::path tmp = fresh_dir("cuda");
  Result r = run(kQuickstart + " --device cuda --out " + (tmp / "results").string(), tmp);
  if (r.code == 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("error: no CUDA device", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  fs::remove_all(tmp);
}

TEST(Runner, AutoDeviceFallsBackToCpuWithANotice) {
  fs::path tmp = fresh_dir("auto");
  Result r = run(kQuickstart + " --device auto --filter fusion=off,accumulation=1 --quiet --out " +
                     (tmp / "results").string(), tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  json m = json::parse(slurp(tmp / "results" / "quickstart" / "manifest.json"));
  if (m["device"]["kind"] == "cpu") {
    EXPECT_NE(r.err.find("using the CPU device"), std::string::npos) << r.err;
  }
  fs::remove_all(tmp);
}

TEST(Runner, InterruptKeepsFinishedCellsAndExits130) {
  fs::path tmp = fresh_dir("sigint");
  // Long enough that the interrupt lands while a later cell is running.
  std::ofstream(tmp / "long.yaml") << "name: long\nsteps: 400\nwarmup_steps: 1\nbatch_size: 64\n"
                                      "model: {hidden_layers: 2, width: 128}\ndata: {input_dim: 32, eval_samples: 64}\n"
                                      "matrix:\n  fusion: [off, on]\n  accumulation: [1, 2]\n";
  pid_t pid = fork();
  if (pid == 0) {
    std::string out = (tmp / "results").string();
    if (!freopen((tmp / "child.txt").c_str(), "w", stderr)) _exit(126);
    execl(MPB_RUNNER_PATH, MPB_RUNNER_PATH, (tmp / "long.yaml").c_str(), "--device", "cpu", "--out", out.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  const fs::path cells = tmp / "results" / "long" / "cells";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         !(fs::exists(cells) && std::distance(fs::directory_iterator(cells), fs::directory_iterator()) >= 1))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << slurp(tmp / "child.txt");
  int finished = 0;
  for (const auto& f : fs::directory_iterator(cells)) {
    EXPECT_EQ(f.path().extension(), ".json") << f.path();
    json c = json::parse(slurp(f.path()));  // every kept file is complete JSON
    EXPECT_EQ(c["schema"], "mpbench.cell/1");
    ++finished;
  }
  EXPECT_GE(finished, 1);
  EXPECT_LT(finished, 4);
  std::string csv = slurp(tmp / "results" / "long" / "summary.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), finished + 1);
  fs::remove_all(tmp);
}

}  // namespace
