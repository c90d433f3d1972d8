#include "runner/results/hung_cell.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <cstring>
#include <vector>

#include "runner/io/atomic_file.h"
#include "runner/results/manifest.h"
#include "runner/io/seconds_since.h"

namespace mpb {

namespace {
std::vector<std::string> g_command_line;
std::chrono::steady_clock::time_point g_started;
constexpr double kSpentMinutes = 1e-6;

std::string minutes_text(double minutes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", minutes);
  return buf;
}
}  // namespace

void remember_command_line(int argc, char** argv) {
  g_command_line.assign(argv, argv + argc);
  g_started = std::chrono::steady_clock::now();
}

std::vector<std::string> restart_arguments(std::vector<std::string> args, double elapsed_s) {
  bool resume = false;
  const std::string flag = "--max-minutes";
  const auto left = [&](const std::string& given) {
    try {
      const double minutes = std::stod(given);
      if (!(minutes > 0)) return given;  // 0: no limit
      // Never 0 (which means no limit): a spent budget still runs the one
      // repeat every invocation runs, then stops.
      return minutes_text(std::max(kSpentMinutes, minutes - elapsed_s / 60.0));
    } catch (const std::exception&) {
      return given;  // the parser accepted it once; leave anything else to it
    }
  };
  for (size_t i = 0; i < args.size(); ++i) {
    resume = resume || args[i] == "--resume";
    if (args[i] == flag && i + 1 < args.size()) {
      args[i + 1] = left(args[i + 1]);
      ++i;
    } else if (args[i].rfind(flag + "=", 0) == 0) {
      args[i] = flag + "=" + left(args[i].substr(flag.size() + 1));
    }
  }
  if (!resume) args.push_back("--resume");
  return args;
}

nlohmann::json hung_cell_record(const Cell& cell, int repeat, const WatchdogReport& report) {
  return {{"schema", "mpbench.failed/1"},
          {"cell_id", cell.id},
          {"config_hash", config_hash(cell_config_to_json(cell.config))},
          {"status", "hung"},
          {"repeat", repeat},
          {"last_step", report.last_step},
          {"steps", report.steps},
          {"waited_s", report.waited_s},
          {"limit_s", report.limit_s},
          {"reason", report.reason()},
          {"at", utc_now_iso8601()}};
}

void record_hang_and_restart(const std::filesystem::path& record_path, const nlohmann::json& record) {
  std::filesystem::create_directories(record_path.parent_path());
  write_file_atomic(record_path.string(), record.dump(1) + "\n");
  // write(2), not stdio: the stuck thread may hold stderr's lock (blocked on a full pipe, say).
  const std::string msg = "\nrunner: watchdog: " + record.at("cell_id").get<std::string>() + " repeat " +
                          std::to_string(record.at("repeat").get<int>() + 1) + " " +
                          record.at("reason").get<std::string>() + "; recorded in " + record_path.string() +
                          "; restarting to run the other cells (--resume)\n";
  (void)!::write(STDERR_FILENO, msg.data(), msg.size());
  const double elapsed_s = seconds_since(g_started);
  std::vector<std::string> args = restart_arguments(g_command_line, elapsed_s);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);  // the table is printed at the end: nothing the stuck thread holds
  // /proc/self/exe: this very binary, however argv[0] named it.
  ::execv("/proc/self/exe", argv.data());
  const std::string err = std::string("runner: watchdog: cannot restart the runner (") + std::strerror(errno) +
                          "); run it again with --resume\n";
  (void)!::write(STDERR_FILENO, err.data(), err.size());
}

}  // namespace mpb
