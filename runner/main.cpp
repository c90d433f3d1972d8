// runner FILE.yaml [--out DIR] [--device cpu|cuda|auto] [--filter EXPR] [--dry-run] [--resume]
//        [--order interleaved|sequential] [--order-seed N]
//        [--fail-on-divergence] [--stall-timeout S] [--cell-timeout S] [--export-reference DIR]
//        [--assume-gpu NAME] [--lock-clocks base|MHZ] [--find-max-batch] [--shard I/N]
// runner merge OUT DIR... [--allow-mixed] [--scheduler FILE]   (runner/commands/merge.h)
// runner doctor [...]                                          (runner/commands/doctor.h)
// runner selftest [--device cpu|cuda|auto] [--quick] [--json FILE]  (runner/commands/selftest.h)
// runner describe --json                                      (runner/experiment/describe.h)
// Exit codes: runner/commands/run_experiment.h ExitCode, docs/RESULTS.md.
#include <CLI/CLI.hpp>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/device.h"
#include "runner/experiment/config.h"
#include "runner/measure/cost_estimate.h"
#include "runner/experiment/describe.h"
#include "runner/commands/cli_text.h"
#include "runner/commands/doctor.h"
#include "runner/commands/find_max_batch.h"
#include "runner/results/hung_cell.h"
#include "runner/commands/merge.h"
#include "runner/commands/reference_export.h"
#include "runner/results/result_dir.h"
#include "runner/commands/run_experiment.h"
#include "runner/commands/selftest.h"
#include "runner/io/output_path.h"

namespace {
void on_sigint(int) { mpb::g_interrupted = true; }

// --max-minutes 0 would start no repeat at all; it once meant "no limit"
// without saying so, so it is refused rather than guessed at.
const CLI::Validator positive_minutes(
    [](std::string& text) {
      return std::strtod(text.c_str(), nullptr) > 0 ? std::string()
                                                     : std::string("must be more than 0 minutes (leave --max-minutes out "
                                                                   "for no limit)");
    },
    "MINUTES > 0");

// What the command line asks for: the run's options and the values main
// turns into them once parsed.
struct CommandLine {
  std::string file;
  mpb::RunOptions opt;
  std::string order = "interleaved";
  uint64_t order_seed = 0;
  CLI::Option* seed_opt = nullptr;
  CLI::Option* assume_gpu_opt = nullptr;
  bool find_max_batch = false;
  std::string lock_clocks, shard, export_dir;
  // The options that exist for mpbench's own tests (planted slowdowns and hangs): hidden from
  // --help (CLI11 hides the group ""), listed by --help-all under this heading.
  std::string testing_group;
};

// The experiment file, where results go, which cells, and in what order.
void add_run_options(CLI::App& app, CommandLine& cl) {
  mpb::RunOptions& opt = cl.opt;
  app.add_option("file", cl.file, "experiment YAML (see docs/CONFIG.md)")->required();
  app.add_option("--out", opt.out_dir, "results root; files go to <out>/<experiment name>/")->default_val("results");
  app.add_option("--device", opt.device, "cpu, cuda or auto (default: the file's device, else auto)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--filter", opt.filter, "run only cells matching key=value[,key=value...]");
  app.add_flag("--dry-run", opt.dry_run, "list the expanded cells and exit");
  app.add_flag("--resume", opt.resume,
               "keep finished cells and finished repeats whose results exist with the same config; run the rest");
  app.add_option("--order", cl.order,
                 "interleaved: round r runs repeat r of every cell in a seeded random order (noise lands on every "
                 "cell alike); sequential: all repeats of one cell, then the next")
      ->check(CLI::IsMember({"interleaved", "sequential"}))
      ->default_val("interleaved");
  cl.seed_opt = app.add_option("--order-seed", cl.order_seed,
                               "seed of the interleaved order (default: from the experiment's config hash)");
  app.add_flag("--quiet", opt.quiet, "no progress lines or table");
  app.add_option("--inject-step-delay-ms", opt.inject_step_delay_ms,
                 "TESTING ONLY: sleep this long inside every timed step, a planted slowdown for testing a "
                 "regression gate (recorded in the manifest and every repeat; docs/REPORTS.md)")
      ->check(mpb::finite_range(0.0, 60000.0))
      ->group(cl.testing_group);
  app.add_option("--max-minutes", opt.max_minutes,
                 "start no repeat after this many minutes (the running one finishes): the run stops cleanly, "
                 "exit code 5, and --resume continues it; for runs in slices (a GPU lease, a job's time limit). "
                 "More than 0 (0 is refused: leave the option out for no limit)")
      ->check(mpb::finite_range(0.0, 1e6))
      ->check(positive_minutes)
      ->type_name("MINUTES");
  app.add_flag("--fail-on-divergence", opt.fail_on_divergence,
               "exit 3 when a cell diverged (a non-finite final or eval loss); by default divergence is a "
               "result, shown in the table, and the exit code is 0");
}

// The watchdog's limits (runner/results/watchdog.h), in seconds, and its planted hang.
void add_watchdog_options(CLI::App& app, mpb::RunOptions& opt, const std::string& testing_group) {
  for (const auto& [name, seconds, help] : {
           std::tuple<const char*, double*, const char*>{
               "--stall-timeout", &opt.watchdog.stall_s,
               "seconds without a completed step (or evaluation chunk) after which a repeat counts as hung (default: "
               "automatic, 20x the median step so far, at least 60 s; 600 s before the first step). A hung cell is "
               "recorded in failed/ and the runner restarts itself (--resume) to run the other cells; the exit code "
               "is 1"},
           {"--cell-timeout", &opt.watchdog.repeat_s,
            "seconds one repeat of a cell may take at most, set-up included (default: no limit); over it, the cell "
            "is recorded as hung like a stall"}})
    app.add_option(name, *seconds, help)->check(mpb::finite_range(0.1, 1e7));
  app.add_option("--inject-hang", opt.inject_hang,
                 "TESTING ONLY: cells matching this --filter expression hang after step 3 (a planted hang for the "
                 "watchdog's test; recorded in the manifest)")
      ->group(testing_group);
}

// The estimate's GPU, the other modes (find-max-batch, export) and the machine's share.
void add_mode_options(CLI::App& app, CommandLine& cl) {
  cl.assume_gpu_opt = app.add_option("--assume-gpu", cl.opt.assume_gpu,
                 "estimate the run's time for this GPU's dense peaks (rtx3090, a100, h100, l4, rtx4090, ...; "
                 "docs/CONFIG.md): --dry-run prints it per cell; a real run keeps it beside the measured time")
      ->type_name("NAME");
  app.add_flag("--find-max-batch", cl.find_max_batch,
               "print the largest batch_size each cell (after --filter) can train with on the device: its memory "
               "estimate against free memory, and on a GPU two real training steps per candidate; writes nothing");
  app.add_option("--lock-clocks", cl.lock_clocks,
                 "hold the GPU's SM clock at its base clock ('base') or at MHZ for the whole run, through NVML "
                 "(needs root; refused: the run stops before anything is written); released at the end and "
                 "recorded in the manifest (device.clock_lock)")
      ->type_name("base|MHZ");
  app.add_option("--shard", cl.shard,
                 "run only share I of N (0 <= I < N) of the cells, balanced by GEMM FLOPs x steps x repeats, "
                 "into <out>/<name>.shard-I-of-N/; `runner merge` joins the shares (docs/SCALE.md)")
      ->type_name("I/N");
  app.add_option("--export-reference", cl.export_dir,
                 "write the one cell --filter selects (weights, batches, mpbench's logits, gradients and losses) "
                 "to DIR for scripts/torch_reference.py (docs/REFERENCE.md), on the CPU, and exit")
      ->type_name("DIR");
}

// The runner's one-line error on stderr; `code`, the exit code, back for the
// caller to return.
int fail_with(int code, const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return code;
}

// The parsed values into cl.opt; a value CLI11 cannot judge alone is refused
// here: kExitBadInput, else nullopt.
std::optional<int> finish_options(CommandLine& cl) {
  mpb::RunOptions& opt = cl.opt;
  opt.order = mpb::parse_run_order(cl.order);
  if (opt.out_dir.empty())  // '' would write into the current directory
    return fail_with(mpb::kExitBadInput, "--out '': name a directory for the results (default: results)");
  // Before any work (a GEMM ceiling is measured first): a file, a FIFO or a read-only place
  // once failed with a raw "filesystem error" and exit 1 minutes later (issue 43 item 11).
  if (!opt.dry_run && !cl.find_max_batch && cl.export_dir.empty()) {
    try {
      mpb::check_output_dir(opt.out_dir);
    } catch (const mpb::OutputPathError& e) {
      return fail_with(mpb::kExitBadInput, std::string("--out ") + e.what() + "; nothing was written");
    }
  }
  if (cl.assume_gpu_opt->count() && opt.assume_gpu.empty()) {
    return fail_with(mpb::kExitBadInput,
                     "--assume-gpu '': name a GPU (rtx3090, a100, h100, l4, rtx4090, ...; docs/CONFIG.md)");
  }
  if (std::string error; !opt.assume_gpu.empty() && !mpb::assumed_gpu_basis(opt.assume_gpu, &error))
    return fail_with(mpb::kExitBadInput, error);
  if (cl.seed_opt->count()) opt.order_seed = cl.order_seed;
  if (!cl.lock_clocks.empty()) {
    std::string error;
    opt.lock_clocks = mpb::parse_clock_lock(cl.lock_clocks, &error);
    if (!opt.lock_clocks) return fail_with(mpb::kExitBadInput, error);
  }
  if (!cl.shard.empty()) {
    std::string error;
    opt.shard = mpb::parse_shard(cl.shard, &error);
    if (!opt.shard) return fail_with(mpb::kExitBadInput, error);
    if (!cl.export_dir.empty())
      return fail_with(mpb::kExitBadInput, "--shard and --export-reference do not combine (the export is one cell)");
  }
  return std::nullopt;
}

// The experiment file's command: export, find-max-batch or the run.
int run_command(const CommandLine& cl) {
  mpb::ExperimentConfig exp;
  std::error_code ec;
  if (!std::filesystem::exists(cl.file, ec)) {  // a mistyped subcommand reads as a file name
    std::vector<std::string> names;
    for (const mpb::Subcommand& sub : mpb::runner_subcommands()) names.emplace_back(sub.name);
    if (const auto near = mpb::nearest_name(cl.file, names))
      return fail_with(mpb::kExitBadInput, "no file or subcommand '" + cl.file + "'; did you mean 'runner " + *near +
                                               "'? (runner --help lists the subcommands)");
  }
  try {
    exp = mpb::load_experiment(cl.file);
  } catch (const mpb::ConfigError& e) {
    return fail_with(mpb::kExitBadInput, e.what());
  }
  if (!cl.export_dir.empty()) return mpb::run_export_reference(exp, cl.opt.filter, cl.export_dir);
  std::signal(SIGINT, on_sigint);
  std::signal(SIGTERM, on_sigint);
  try {
    if (cl.find_max_batch) return mpb::run_find_max_batch(exp, cl.opt);
    return mpb::run_experiment(exp, cl.opt);
  } catch (const mpb::ResultDirBusy& e) {
    return fail_with(mpb::kExitBusy, e.what());
  } catch (const std::exception& e) {  // DeviceError and the rest: a failed run
    return fail_with(mpb::kExitFailure, e.what());
  }
}

// True when the command line holds `flag` before any "--".
bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i) {
    if (std::string(argv[i]) == flag) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // A reader that goes away (`runner selftest --json FIFO`, `runner ... | head`) makes a write
  // fail with EPIPE, which the writers report (exit 2), instead of killing the runner silently.
  std::signal(SIGPIPE, SIG_IGN);
  // The subcommands each own a parser (runner/commands/*.h); --help lists them.
  if (argc > 1) {
    const std::string first = argv[1];
    if (first == "doctor") return mpb::run_doctor(argc - 1, argv + 1);
    if (first == "merge") return mpb::run_merge(argc - 1, argv + 1);
    if (first == "selftest") return mpb::run_selftest(argc - 1, argv + 1);
    if (first == "describe") return mpb::run_describe(argc - 1, argv + 1);
  }
  if (has_flag(argc, argv, "--version")) {
    std::fputs(mpb::version_text().c_str(), stdout);
    return mpb::kExitOk;
  }
  CLI::App app{"mpbench runner: trains every cell of an experiment matrix and records speed, memory and convergence. "
               "runner FILE.yaml runs it; runner --version says what this runner is."};
  mpb::use_runner_cli_text(app, "runner");
  app.footer(mpb::subcommands_help());
  CommandLine cl;
  const bool help_all = has_flag(argc, argv, "--help-all");
  cl.testing_group = help_all ? "Options for mpbench's own tests (docs/TESTING.md)" : "";
  add_run_options(app, cl);
  add_watchdog_options(app, cl.opt, cl.testing_group);
  add_mode_options(app, cl);
  app.add_flag("--help-all", "this help with the options for mpbench's own tests");
  app.add_flag("--version", "print the version, commit, build and libraries, and exit");
  if (help_all) {
    std::fputs(app.help().c_str(), stdout);
    return mpb::kExitOk;
  }
  mpb::remember_command_line(argc, argv);  // the watchdog restarts the runner with it
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? mpb::kExitOk : mpb::kExitBadInput;
  }
  if (const std::optional<int> rc = finish_options(cl)) return *rc;
  return run_command(cl);
}
