// The schema of docs/CONFIG.md: one table, schema::keys(), of every per-cell
// key of an experiment file (dotted for nested ones: "optimizer.lr") with its
// type, bounds, choices and where it lives in CellConfig. It is the one place
// that turns the YAML's strings into CellConfig's types (enums, bools, the
// resolved PrecisionPolicy) and back into canonical strings, so cell ids,
// matching, the resolved-configuration JSON and its hash all read the same
// spelling. The YAML loader (runner/experiment/config_loader.cpp) handles the file's
// structure and positions; every value's text goes through here.
#pragma once

#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/cell_config.h"

namespace mpb {

// ---- For everyone ---------------------------------------------------------------

// Valid values that the trainer cannot run yet (the "not supported yet" table).
// `key` is a dotted scalar key ("precision", "loss_scale.mode", "model.kind"),
// `value` its canonical string. Returns why the value is rejected, or nullopt.
std::optional<std::string> unsupported_reason(const std::string& key, const std::string& value);

// The canonical string of a resolved key's value, as cell ids use it:
// ("optimizer.lr" -> "0.001", "fusion" -> "off", "loss_scale" -> "dynamic{init:1024}",
// "inject_nonfinite" -> "[5,9]" or "[]", "optimizer.decay_exclude" -> "[bias,layernorm]").
// Throws std::invalid_argument for a key that is not a per-cell key of the schema.
std::string config_value_string(const CellConfig& config, const std::string& key);

// The full resolved configuration as JSON (same key names and nesting as the YAML,
// values as the YAML spells them: "fusion": "off"; loss_scale always as the full
// map, inject_nonfinite as an array of integers, optimizer.decay_exclude as the
// effective array of names, left out when empty: see cell_config_to_json).
nlohmann::json cell_config_to_json(const CellConfig& config);

// Sets config.precision to the canonical spelling of `text` and config.policy to
// what it means (resolve_policy, core/precision.h), as the loader does for a
// `precision:` value. Throws std::invalid_argument with the loader's message.
void set_precision(CellConfig& config, const std::string& text);

// A rule that involves more than one key, broken by a resolved configuration.
struct CellProblem {
  std::vector<std::string> keys;  // the keys involved, most specific first
  std::string message;
  bool unsupported = false;  // from the "not supported yet" table (keys: the one key)
};
// The checks a configuration must pass before it runs (warmup_steps < steps,
// accumulation divides batch_size, inject_nonfinite steps <= steps, loss_scale
// min <= max, model and data kinds that fit, checkpointing only for BERT, ...),
// in a fixed order; the first one that fails. With reject_unsupported, the "not
// supported yet" table too. The loader points the problem at the file; the cell
// factory throws it.
std::optional<CellProblem> check_cell_config(const CellConfig& config, bool reject_unsupported = false);

// ---- The table: for the loader and the matrix expansion ---------------------------
namespace schema {

enum class Type {
  Int,        // int, decimal digits only
  Seed,       // uint64_t
  Number,     // double, finite
  Choice,     // one of `choices` (or an alias of one): an enum or bool field
  Precision,  // whatever core/precision's resolve_policy accepts
  LossScale,  // none | static | dynamic | number | map of loss_scale.* keys
  StepList,   // a list of distinct optimizer steps (Int items within `bounds`), kept sorted
  NameList,   // a list of distinct names from `choices`, kept in the order of `choices`
  Text,       // any non-empty string (a file path)
};

// Allowed interval of a number; open ends are exclusive.
struct Bounds {
  double lo = -std::numeric_limits<double>::infinity();
  bool lo_open = false;
  double hi = std::numeric_limits<double>::infinity();
  bool hi_open = false;
};

// A precision value: its canonical spelling and what it resolves to.
struct Precision {
  std::string name;
  PrecisionPolicy policy;
};

// A parsed, validated value of a key. Choice values are their canonical name.
using Value = std::variant<int, uint64_t, double, std::string, LossScaleConfig, std::vector<int>, Precision,
                           std::vector<std::string>>;

struct KeySpec {
  std::string key;  // dotted, as in the YAML: "optimizer.lr"
  Type type;
  Bounds bounds;                                             // Int, Number, StepList items
  std::vector<std::string> choices;                          // Choice, NameList items: canonical names
  std::vector<std::pair<std::string, std::string>> aliases;  // Choice: spelling -> choice
  std::function<Value(const CellConfig&)> get;               // the field's value
  std::function<void(CellConfig&, const Value&)> set;        // writes a parsed value
};

// Every per-cell key, in docs/CONFIG.md order.
const std::vector<KeySpec>& keys();
const KeySpec* find_spec(const std::string& key);  // nullptr: not a per-cell key
// `device` is per experiment (ExperimentConfig), not per cell: a Choice without a field.
const KeySpec& device_spec();
// The per-cell keys (matrix axes, include/exclude/baseline and filter keys).
std::vector<std::string> cell_keys();
std::vector<std::string> keys_with_prefix(const std::string& prefix);
// What may appear at the top level of a file, in docs/CONFIG.md order.
std::vector<std::string> top_level_keys();
extern const std::vector<std::string> kSections;        // model, data, optimizer
extern const std::vector<std::string> kExperimentKeys;  // name, device, matrix, exclude, ...

// The keys that the "not supported yet" table has rows for.
std::vector<std::string> not_yet_keys();

// One spelling per value: "0.001" for 1e-3, "off" for false, "dynamic{init:1024}".
std::string canonical(const Value& value);
// Shortest round-trip decimal with a plain exponent ("1e-8", not "1e-08").
std::string format_number(double v);

// Parsing one value's text. Each throws ValueError with the message a
// ConfigError gives after the key ("expected an integer, got 'x'").
struct ValueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// What a key's value must look like, for "expected ..., got a list" ("an integer").
std::string expected_form(const KeySpec& spec);
// A scalar value of any type but StepList; for LossScale, the scalar forms (a mode
// or a number); a map of loss_scale.* keys is the loader's; for NameList, one
// item (a name from choices, as a std::string).
Value parse_scalar(const KeySpec& spec, const std::string& text);
int parse_int(const KeySpec& spec, const std::string& text);  // within spec.bounds

// Text helpers shared by the loader and the matrix code.
bool contains(const std::vector<std::string>& list, const std::string& s);
bool starts_with(const std::string& s, const std::string& prefix);
std::string join(const std::vector<std::string>& items, const std::string& separator);

}  // namespace schema
}  // namespace mpb
