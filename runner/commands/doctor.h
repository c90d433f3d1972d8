// `runner doctor`: a preflight check of everything that decides whether this
// machine's measurements can be trusted, before hours of training go into
// them: the GPU, driver and libraries; the CPU's frequency governor and
// clock; other busy processes; free memory and disk; environment variables
// that silently change GEMM math; the GEMM ceiling of every compute mode;
// whether an energy counter can be read; and a ten-second subset of the op
// checks on the device runs will use.
//
// One line per check: ok / warn / FAIL, what was found, and what it means for
// measurements. FAIL is a blocker (the requested device is unusable, an op
// check failed, less than 1 GiB of memory or disk): exit 1. Warnings never
// fail. --json FILE writes the same as JSON ("schema": "mpbench.doctor/1").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpb {

enum class CheckStatus { Ok, Warn, Fail };
const char* check_status_name(CheckStatus s);  // "ok", "warn", "FAIL"

struct DoctorCheck {
  std::string name;     // "cpu governor"
  CheckStatus status = CheckStatus::Ok;
  std::string finding;  // what was found
  std::string meaning;  // what it means for measurements (may be empty for a plain ok)
  nlohmann::json data = nlohmann::json::object();  // the numbers behind the finding
};

// Less free memory or disk than this is a blocker: a run would fail part way,
// or swap, which makes every step time meaningless.
constexpr double kDoctorMinFreeBytes = 1024.0 * 1024.0 * 1024.0;

struct DoctorOptions {
  std::string device = "auto";   // cpu | cuda | auto
  std::string out_dir = "results";
  std::string json_path;         // empty: no JSON
  double selftest_seconds = 10.0;  // 0: skip the op checks
  double load_seconds = 1.0;     // the window machine load is sampled over
  int gemm_size = 0;             // 0: ceiling_gemm_size(device), as runs use
  int gemm_reps = 3;
};

// Runs every check in order, printing each line as it completes.
std::vector<DoctorCheck> run_doctor_checks(const DoctorOptions& opt);
// The line printed for a check: "warn  cpu governor   powersave ... — meaning".
std::string doctor_line(const DoctorCheck& c);
nlohmann::json doctor_json(const DoctorOptions& opt, const std::vector<DoctorCheck>& checks, double seconds);

// `runner doctor [options]`: argv[0] is "doctor". Returns the exit code:
// 0 no blocker, 1 a blocker, 2 a bad command line.
int run_doctor(int argc, char** argv);

}  // namespace mpb
