// The runner's shared command-line text (cli_text.h).
#include "runner/commands/cli_text.h"

#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config_errors.h"  // nearest_name
#include "core/device.h"
#include "runner/io/build_info.h"
#include "runner/machine/device_factory.h"
#include "runner/results/manifest.h"  // libraries_json

namespace mpb {

std::string wrap_words(const std::string& text, std::size_t width) {
  std::string out, line;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

namespace {

// CLI11's layout with the descriptions wrapped: CLI11 2.1 prints them on one line
// however long (some were ~300 characters), and indents after each '\n' itself.
class WrappedFormatter : public CLI::Formatter {
 public:
  std::string make_option_desc(const CLI::Option* opt) const override {
    return wrap_words(CLI::Formatter::make_option_desc(opt), kHelpColumns - get_column_width());
  }
  std::string make_description(const CLI::App* app) const override {
    return wrap_words(app->get_description(), kHelpColumns) + "\n\n";
  }
};

std::string option_spelling(const std::string& arg) {
  return arg.substr(0, arg.find('='));  // "--out=x" -> "--out"
}

}  // namespace

CLI::Validator finite_range(double lo, double hi) {
  const std::string range = "[" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(v))
          return "must be a finite number, not '" + text + "'";
        if (v < lo || v > hi) return "must be in " + range + ", not " + text;
        return std::string();
      },
      "");  // the help shows the type; the error says the range
}

std::string unknown_option_message(const CLI::App& app, const std::vector<std::string>& unexpected) {
  std::vector<std::string> flags;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) flags.push_back("--" + name);
  }
  std::string message;
  for (const std::string& arg : unexpected) {
    if (arg.rfind("--", 0) != 0) continue;
    const std::string flag = option_spelling(arg);
    message += (message.empty() ? "" : "; ") + ("unknown option '" + flag + "'");
    if (const auto near = nearest_name(flag, flags)) message += "; did you mean '" + *near + "'?";
  }
  return message;
}

void use_runner_cli_text(CLI::App& app, const std::string& command) {
  app.formatter(std::make_shared<WrappedFormatter>());
  app.failure_message([command](const CLI::App* a, const CLI::Error& e) {
    std::string what = e.what();
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::ExtrasError)) {  // get_name() is the app's
      const std::string unknown = unknown_option_message(*a, a->remaining(false));
      if (!unknown.empty()) what = unknown;
    }
    return "error: " + what + "\nrun '" + command + " --help' for the options\n";
  });
}

const std::vector<Subcommand>& runner_subcommands() {
  static const std::vector<Subcommand> list = {
      {"doctor", "is this machine ready to measure? (devices, drivers, clocks, noise; docs/GPU.md)"},
      {"selftest", "every op and the training checks against the CPU reference on this device"},
      {"describe", "the runner's vocabulary and result fields as JSON, for scripts"},
      {"merge", "join the shards of a run (--shard I/N) into one result set (docs/SCALE.md)"},
  };
  return list;
}

std::string subcommands_help() {
  std::string text = "Subcommands (runner SUBCOMMAND --help for each):\n";
  for (const Subcommand& s : runner_subcommands()) {
    std::string line = "  " + std::string(s.name);
    line.resize(12, ' ');
    text += line + wrap_words(s.summary, kHelpColumns - 12) + "\n";
  }
  return text + "\nrunner --help-all also lists the options that exist for mpbench's own tests.";
}

std::string version_text() {
  std::ostringstream out;
  const nlohmann::json git = git_json(), build = build_json();
  out << "runner (mpbench) " << mpbench_version() << "\n";
  out << "commit " << git.value("commit", "unknown");
  if (git["dirty"].is_boolean()) out << (git["dirty"].get<bool>() ? " (uncommitted changes)" : "");
  out << "\nbuild " << (build["type"].is_string() ? build["type"].get<std::string>() : "unknown type") << ", "
      << build.value("compiler", "unknown compiler");
#ifdef MPB_HAVE_CUDA
  out << ", CUDA backend built in\n";
#else
  out << ", no CUDA backend (CPU only)\n";
#endif
  // The CPU device names its GEMM library; the CUDA versions are the headers' and what this
  // process loaded (no GPU is needed to read them).
  std::string libraries;
  try {
    const nlohmann::json libs = libraries_json(make_device(DeviceKind::Cpu)->info());
    for (const auto& [name, value] : libs.items()) {
      if (value.is_string()) libraries += (libraries.empty() ? "" : ", ") + name + " " + value.get<std::string>();
    }
  } catch (const std::exception& e) {
    libraries = std::string("(not read: ") + e.what() + ")";
  }
  out << wrap_words("libraries: " + libraries, kHelpColumns) << "\n";
  return out.str();
}

}  // namespace mpb
