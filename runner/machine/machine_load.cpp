#include "runner/machine/machine_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace mpb {

namespace {

double timeval_s(const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; }

std::vector<double> read_loadavg() {
  std::ifstream in("/proc/loadavg");
  std::vector<double> v(3);
  if (!(in >> v[0] >> v[1] >> v[2])) return {};
  return v;
}

int online_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
}

}  // namespace

nlohmann::json LoadWindow::to_json() const {
  nlohmann::json j;
  j["loadavg"] = loadavg;
  j["other_cpu_fraction"] = other_cpu ? nlohmann::json(*other_cpu) : nlohmann::json(nullptr);
  j["steal_fraction"] = steal ? nlohmann::json(*steal) : nlohmann::json(nullptr);
  j["seconds"] = seconds;
  j["busy"] = busy();
  return j;
}

LoadSampler::Counters LoadSampler::read() {
  Counters c;
  c.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  rusage self{};
  if (getrusage(RUSAGE_SELF, &self) == 0) c.own_s = timeval_s(self.ru_utime) + timeval_s(self.ru_stime);
  // The first line of /proc/stat: cpu user nice system idle iowait irq softirq steal ...
  std::ifstream in("/proc/stat");
  std::string line;
  if (!std::getline(in, line) || line.rfind("cpu ", 0) != 0) return c;
  std::istringstream f(line.substr(4));
  double v[8] = {};
  for (double& x : v)
    if (!(f >> x)) return c;
  const double hz = double(sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100);
  c.busy_s = (v[0] + v[1] + v[2] + v[5] + v[6]) / hz;  // user nice system irq softirq (not idle, iowait)
  c.steal_s = v[7] / hz;
  return c;
}

void LoadSampler::begin() { start_ = read(); }

LoadWindow LoadSampler::end() const {
  const Counters now = read();
  LoadWindow w;
  w.loadavg = read_loadavg();
  w.seconds = now.wall_s - start_.wall_s;
  if (start_.busy_s < 0 || now.busy_s < 0 || w.seconds <= 0) return w;
  const double capacity = w.seconds * online_cpus();
  const double other = (now.busy_s - start_.busy_s) - (now.own_s - start_.own_s);
  // Jiffy counts are coarse (10 ms): clamp the rounding below zero away.
  w.other_cpu = std::min(1.0, std::max(0.0, other / capacity));
  w.steal = std::min(1.0, std::max(0.0, (now.steal_s - start_.steal_s) / capacity));
  return w;
}

LoadWindow sample_idle_load(double seconds) {
  LoadSampler s;
  s.begin();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return s.end();
}

}  // namespace mpb
