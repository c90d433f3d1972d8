#include "runner/machine/process_cpu.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "runner/io/text_file.h"

namespace fs = std::filesystem;

namespace mpb {

std::optional<ProcStat> parse_proc_pid_stat(const std::string& line) {
  const auto open = line.find('(');
  const auto close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcStat s;
  char* end = nullptr;
  const long pid = std::strtol(line.c_str(), &end, 10);
  if (end == line.c_str() || pid <= 0) return std::nullopt;
  s.pid = int(pid);
  s.comm = line.substr(open + 1, close - open - 1);
  // After ") ": field 3 (state) is index 0 here; utime and stime are fields
  // 14 and 15, starttime field 22 (proc(5)).
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> f;
  for (std::string w; rest >> w && f.size() < 20;) f.push_back(w);
  if (f.size() < 20) return std::nullopt;
  auto num = [](const std::string& w, uint64_t* v) {
    if (w.empty() || !std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
    *v = std::strtoull(w.c_str(), nullptr, 10);
    return true;
  };
  uint64_t utime = 0, stime = 0;
  if (!num(f[11], &utime) || !num(f[12], &stime) || !num(f[19], &s.start_ticks)) return std::nullopt;
  s.cpu_ticks = utime + stime;
  return s;
}

std::map<int, ProcStat> read_process_table(const std::string& proc_root) {
  std::map<int, ProcStat> table;
  std::error_code ec;
  for (fs::directory_iterator it(proc_root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    const std::optional<std::string> text = read_text_file((it->path() / "stat").string());
    if (!text) continue;  // exited since the directory was listed
    if (auto s = parse_proc_pid_stat(*text)) table[s->pid] = *s;
  }
  return table;
}

std::vector<ProcessCpu> busiest_processes(const std::map<int, ProcStat>& before,
                                          const std::map<int, ProcStat>& after, double seconds,
                                          double ticks_per_second, int exclude_pid, size_t top, double min_cores) {
  std::vector<ProcessCpu> out;
  if (!(seconds > 0) || !(ticks_per_second > 0)) return out;
  for (const auto& [pid, now] : after) {
    if (pid == exclude_pid) continue;
    uint64_t start = 0;
    const auto was = before.find(pid);
    if (was != before.end() && was->second.start_ticks == now.start_ticks) start = was->second.cpu_ticks;
    if (now.cpu_ticks <= start) continue;
    const double cores = double(now.cpu_ticks - start) / ticks_per_second / seconds;
    if (cores >= min_cores) out.push_back({pid, now.comm, cores});
  }
  std::sort(out.begin(), out.end(), [](const ProcessCpu& a, const ProcessCpu& b) {
    return a.cores != b.cores ? a.cores > b.cores : a.pid < b.pid;
  });
  if (out.size() > top) out.resize(top);
  return out;
}

}  // namespace mpb
