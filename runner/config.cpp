// The experiment-file loader (docs/CONFIG.md is the contract).
//
// One table, schema(), lists every per-cell key of the YAML, dotted for
// nested ones ("optimizer.lr"), with its type, its bounds and where it lives in
// CellConfig. That table drives everything else: the base sections, matrix axes,
// include/exclude/baseline entries, canonical value strings (cell ids and
// matching) and cell_config_to_json, so a key added to the table works everywhere.
//
// Loading runs in this order, each step failing with a ConfigError that names
// file:line:col and the dotted key:
//   1. YAML syntax;  2. top-level keys, name, device and the base values;
//   3. matrix axes and include/exclude/baseline entries (every value validated like
//      a base value);  4. Cartesian product, excludes, includes, duplicates;
//   5. per-cell checks (warmup < steps, accumulation divides batch_size,
//      inject_nonfinite steps <= steps, the "not supported yet" table);  6. the baseline.

#include "runner/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <variant>

#include "core/precision.h"
#include "runner/config_errors.h"

namespace mpb {

// ===========================================================================
// NOT SUPPORTED YET
// Values that are valid in the schema but that the trainer cannot run yet. This
// is the only place that knows; when a feature lands, delete or widen its row.
// Each row allows only the listed values of its key.
// ===========================================================================
namespace {

struct NotYetRow {
  const char* key;    // dotted schema key
  const char* label;  // how the message names it
  std::vector<std::string> supported;
  const char* why;
};

// clang-format off
const std::vector<NotYetRow>& not_supported_yet_table() {
  static const std::vector<NotYetRow> rows = {
      {"optimizer.kind",  "optimizer.kind",  {"adamw", "sgd"},
       "LAMB is planned; adamw and sgd are implemented"},
  };
  return rows;
}
// clang-format on

}  // namespace

std::optional<std::string> unsupported_reason(const std::string& key, const std::string& value) {
  for (const auto& row : not_supported_yet_table()) {
    if (key != row.key) continue;
    const auto& ok = row.supported;
    if (std::find(ok.begin(), ok.end(), value) != ok.end()) return std::nullopt;
    return std::string(row.label) + " '" + value + "' is not supported yet (" + row.why + ")";
  }
  return std::nullopt;
}

namespace {

// ===========================================================================
// The schema table
// ===========================================================================

enum class Type {
  Int,        // int, decimal digits only
  Seed,       // uint64_t
  Number,     // double, finite
  Choice,     // one of `choices` (or an alias of one)
  Precision,  // whatever core/precision's resolve_policy accepts
  LossScale,  // none | static | dynamic | number | map of loss_scale.* keys
  StepList,   // a list of distinct optimizer steps (Int items within `bounds`), kept sorted
  Text,       // any non-empty string (a file path)
};

// Allowed interval of a number; open ends are exclusive.
struct Bounds {
  double lo = -std::numeric_limits<double>::infinity();
  bool lo_open = false;
  double hi = std::numeric_limits<double>::infinity();
  bool hi_open = false;
};

Bounds at_least(double lo) { return {lo, false}; }                          // [lo, inf)
Bounds above(double lo) { return {lo, true}; }                              // (lo, inf)
Bounds closed_open(double lo, double hi) { return {lo, false, hi, true}; }  // [lo, hi)
Bounds open_open(double lo, double hi) { return {lo, true, hi, true}; }     // (lo, hi)

// A place in CellConfig that a key writes to. The order of alternatives matches Value.
using Field = std::variant<int*, uint64_t*, double*, std::string*, LossScaleConfig*,
                           std::vector<int>*>;
// A parsed, validated value of a key.
using Value = std::variant<int, uint64_t, double, std::string, LossScaleConfig, std::vector<int>>;
using Accessor = Field (*)(CellConfig&);

struct KeySpec {
  std::string key;  // dotted, as in the YAML: "optimizer.lr"
  Type type;
  Bounds bounds;                                             // Int, Number, StepList items
  std::vector<std::string> choices;                          // Choice
  std::vector<std::pair<std::string, std::string>> aliases;  // Choice: spelling -> choice
  Accessor field;
};

// YAML 1.2 booleans (and PyYAML's round-trip of `off`) for off/on keys.
const std::vector<std::pair<std::string, std::string>> kOffOnAliases = {
    {"false", "off"}, {"False", "off"}, {"FALSE", "off"},
    {"true", "on"},   {"True", "on"},   {"TRUE", "on"}};
const std::vector<std::pair<std::string, std::string>> kOffAliases = {
    {"false", "off"}, {"False", "off"}, {"FALSE", "off"}};

KeySpec integer(const char* key, Bounds bounds, Accessor field) {
  return {key, Type::Int, bounds, {}, {}, field};
}
KeySpec number(const char* key, Bounds bounds, Accessor field) {
  return {key, Type::Number, bounds, {}, {}, field};
}
KeySpec choice(const char* key, std::vector<std::string> choices, Accessor field,
               std::vector<std::pair<std::string, std::string>> aliases = {}) {
  return {key, Type::Choice, {}, std::move(choices), std::move(aliases), field};
}
KeySpec step_list(const char* key, Bounds item_bounds, Accessor field) {
  return {key, Type::StepList, item_bounds, {}, {}, field};
}
KeySpec text(const char* key, Accessor field) { return {key, Type::Text, {}, {}, {}, field}; }
KeySpec special(const char* key, Type type, Accessor field) {
  return {key, type, {}, {}, {}, field};
}

#define MPB_FIELD(member) [](CellConfig& c) -> Field { return &c.member; }

// Every per-cell key, in docs/CONFIG.md order. Cross-key rules (warmup_steps <
// steps, accumulation divides batch_size, loss_scale min <= max, inject_nonfinite
// steps <= steps) are per cell, in Loader::check_cell.
// clang-format off
const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> keys = {
      special("seed",                       Type::Seed,      MPB_FIELD(seed)),
      integer("steps",                      at_least(1),     MPB_FIELD(steps)),
      integer("warmup_steps",               at_least(0),     MPB_FIELD(warmup_steps)),
      integer("repeats",                    at_least(1),     MPB_FIELD(repeats)),
      integer("eval_every",                 at_least(0),     MPB_FIELD(eval_every)),
      integer("batch_size",                 at_least(1),     MPB_FIELD(batch_size)),
      special("precision",                  Type::Precision, MPB_FIELD(precision)),
      choice ("fusion", {"off", "on"},                       MPB_FIELD(fusion), kOffOnAliases),
      special("loss_scale",                 Type::LossScale, MPB_FIELD(loss_scale)),
      choice ("loss_scale.mode", {"none", "static", "dynamic"}, MPB_FIELD(loss_scale.mode)),
      number ("loss_scale.value",           above(0),        MPB_FIELD(loss_scale.value)),
      number ("loss_scale.init",            above(0),        MPB_FIELD(loss_scale.init)),
      number ("loss_scale.growth_factor",   above(1),        MPB_FIELD(loss_scale.growth_factor)),
      number ("loss_scale.backoff_factor",  open_open(0, 1), MPB_FIELD(loss_scale.backoff_factor)),
      integer("loss_scale.growth_interval", at_least(1),     MPB_FIELD(loss_scale.growth_interval)),
      number ("loss_scale.min",             at_least(0),     MPB_FIELD(loss_scale.min)),
      number ("loss_scale.max",             at_least(0),     MPB_FIELD(loss_scale.max)),
      integer("loss_scale.hysteresis",      at_least(1),     MPB_FIELD(loss_scale.hysteresis)),
      choice ("checkpointing", {"off", "every_layer", "every_k", "sqrt"},
                                                             MPB_FIELD(checkpointing), kOffAliases),
      integer("checkpoint_k",               at_least(1),     MPB_FIELD(checkpoint_k)),
      integer("accumulation",               at_least(1),     MPB_FIELD(accumulation)),
      number ("loss_weight",                above(0),        MPB_FIELD(loss_weight)),
      integer("numerics_every",             at_least(0),     MPB_FIELD(numerics_every)),
      step_list("inject_nonfinite",         at_least(1),     MPB_FIELD(inject_nonfinite)),
      choice ("model.kind", {"mlp", "bert"},                 MPB_FIELD(model.kind)),
      integer("model.hidden_layers",        at_least(1),     MPB_FIELD(model.hidden_layers)),
      integer("model.width",                at_least(1),     MPB_FIELD(model.width)),
      choice ("model.activation", {"gelu", "relu"},          MPB_FIELD(model.activation)),
      number ("model.init_scale",           above(0),        MPB_FIELD(model.init_scale)),
      choice ("model.size", {"tiny", "mini", "small", "medium", "base", "large"},
                                                             MPB_FIELD(model.size)),
      integer("model.layers",               at_least(0),     MPB_FIELD(model.layers)),
      integer("model.hidden",               at_least(0),     MPB_FIELD(model.hidden)),
      integer("model.heads",                at_least(0),     MPB_FIELD(model.heads)),
      integer("model.ffn",                  at_least(0),     MPB_FIELD(model.ffn)),
      integer("model.seq_len",              at_least(2),     MPB_FIELD(model.seq_len)),
      choice ("model.pre_ln", {"off", "on"},                 MPB_FIELD(model.pre_ln), kOffOnAliases),
      number ("model.dropout",              closed_open(0, 1), MPB_FIELD(model.dropout)),
      choice ("model.pad_vocab", {"off", "on"},              MPB_FIELD(model.pad_vocab), kOffOnAliases),
      number ("model.ln_eps",               above(0),        MPB_FIELD(model.ln_eps)),
      choice ("data.kind", {"teacher", "markov", "text"},    MPB_FIELD(data.kind)),
      integer("data.vocab",                 at_least(8),     MPB_FIELD(data.vocab)),
      text   ("data.path",                                   MPB_FIELD(data.path)),
      integer("data.input_dim",             at_least(1),     MPB_FIELD(data.input_dim)),
      integer("data.classes",               at_least(2),     MPB_FIELD(data.classes)),
      integer("data.teacher_hidden",        at_least(1),     MPB_FIELD(data.teacher_hidden)),
      integer("data.eval_samples",          at_least(1),     MPB_FIELD(data.eval_samples)),
      choice ("optimizer.kind", {"adamw", "sgd", "lamb"},    MPB_FIELD(optimizer.kind)),
      number ("optimizer.lr",               above(0),        MPB_FIELD(optimizer.lr)),
      number ("optimizer.beta1",            closed_open(0, 1), MPB_FIELD(optimizer.beta1)),
      number ("optimizer.beta2",            closed_open(0, 1), MPB_FIELD(optimizer.beta2)),
      number ("optimizer.eps",              above(0),        MPB_FIELD(optimizer.eps)),
      number ("optimizer.weight_decay",     at_least(0),     MPB_FIELD(optimizer.weight_decay)),
      number ("optimizer.momentum",         closed_open(0, 1), MPB_FIELD(optimizer.momentum)),
      number ("optimizer.grad_clip",        at_least(0),     MPB_FIELD(optimizer.grad_clip)),
      integer("optimizer.warmup",           at_least(0),     MPB_FIELD(optimizer.warmup)),
      choice ("optimizer.decay", {"none", "linear", "cosine"}, MPB_FIELD(optimizer.decay)),
  };
  return keys;
}
// clang-format on
#undef MPB_FIELD

// `device` is per experiment, not per cell, so it is not in schema(); it is parsed
// like a Choice key and never written through `field`.
const KeySpec& device_spec() {
  static const KeySpec spec{"device", Type::Choice, {}, {"auto", "cpu", "cuda"}, {}, nullptr};
  return spec;
}

const std::vector<std::string> kSections = {"model", "data", "optimizer"};
// Top-level keys that are not part of a cell's configuration.
const std::vector<std::string> kExperimentKeys = {"name",    "device",  "matrix",
                                                  "exclude", "include", "baseline"};

const KeySpec* find_spec(const std::string& key) {
  for (const auto& spec : schema()) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Every key that may be a matrix axis, an include/exclude/baseline key or a filter key.
std::vector<std::string> cell_keys() {
  std::vector<std::string> keys;
  for (const auto& spec : schema()) keys.push_back(spec.key);
  return keys;
}

std::vector<std::string> keys_with_prefix(const std::string& prefix) {
  std::vector<std::string> keys;
  for (const auto& spec : schema()) {
    if (starts_with(spec.key, prefix)) keys.push_back(spec.key);
  }
  return keys;
}

// What may appear at the top level, in docs/CONFIG.md order.
std::vector<std::string> top_level_keys() {
  std::vector<std::string> keys = {"name", "device"};
  for (const auto& spec : schema()) {
    if (spec.key.find('.') == std::string::npos) keys.push_back(spec.key);
  }
  keys.insert(keys.end(),
              {"model", "data", "optimizer", "matrix", "exclude", "include", "baseline"});
  return keys;
}

// ===========================================================================
// Canonical strings: one spelling per value, so that 1e-3 and 0.001 give the
// same cell id and match each other.
// ===========================================================================

// Shortest round-trip decimal, with a plain exponent ("1e-8", not "1e-08").
std::string format_number(double v) {
  if (v == 0) v = 0;  // -0 and 0 are the same value; print both as "0"
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  std::string text(buffer, result.ptr);
  const auto e = text.find('e');
  if (e == std::string::npos) return text;
  const std::string mantissa = text.substr(0, e);
  const bool negative = text[e + 1] == '-';
  std::string digits = text.substr(e + 2);  // after the sign to_chars always writes
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
  return mantissa + "e" + (negative ? "-" : "") + digits;
}

Value read_field(Field field) {
  return std::visit(
      [](auto* p) { return Value(std::in_place_type<std::decay_t<decltype(*p)>>, *p); }, field);
}

void write_field(Field field, const Value& value) {
  std::visit([&](auto* p) { *p = std::get<std::decay_t<decltype(*p)>>(value); }, field);
}

// Reads a key of a const config. The accessors only take addresses; nothing is written.
Value read_key(const KeySpec& spec, const CellConfig& config) {
  return read_field(spec.field(const_cast<CellConfig&>(config)));
}

std::string canonical(const Value& value);

// The mode, then the fields that differ from LossScaleConfig's defaults in table
// order: "dynamic", "static{value:1024}", "dynamic{init:1024;growth_interval:100}".
// Equal loss-scale configurations give equal strings however they were written.
std::string format_loss_scale(const LossScaleConfig& loss_scale) {
  CellConfig actual;
  const CellConfig defaults;
  actual.loss_scale = loss_scale;
  std::string fields;
  for (const auto& key : keys_with_prefix("loss_scale.")) {
    if (key == "loss_scale.mode") continue;
    const KeySpec& spec = *find_spec(key);
    const std::string value = canonical(read_key(spec, actual));
    if (value == canonical(read_key(spec, defaults))) continue;
    fields += (fields.empty() ? "" : ";") + key.substr(key.find('.') + 1) + ":" + value;
  }
  return fields.empty() ? loss_scale.mode : loss_scale.mode + "{" + fields + "}";
}

std::string canonical(const Value& value) {
  struct Visitor {
    std::string operator()(int v) const { return std::to_string(v); }
    std::string operator()(uint64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return format_number(v); }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const LossScaleConfig& v) const { return format_loss_scale(v); }
    std::string operator()(const std::vector<int>& v) const {  // "[]", "[5,9]"
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
      return out + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

// ===========================================================================
// Number syntax. Plain decimals only, so that YAML spellings such as .inf, 0x10
// or 1_000 are rejected instead of half-parsed.
// ===========================================================================

bool is_digit(char c) { return c >= '0' && c <= '9'; }

size_t skip_digits(const std::string& s, size_t i) {
  while (i < s.size() && is_digit(s[i])) ++i;
  return i;
}

// [+-]digits
bool is_decimal_integer(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  const size_t end = skip_digits(s, i);
  return end > i && end == s.size();
}

// [+-](digits[.digits] | .digits)[(e|E)[+-]digits]
bool is_decimal_number(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  const size_t int_end = skip_digits(s, i);
  size_t end = int_end;
  bool has_digits = int_end > i;
  if (end < s.size() && s[end] == '.') {
    const size_t frac_end = skip_digits(s, end + 1);
    has_digits = has_digits || frac_end > end + 1;
    end = frac_end;
  }
  if (!has_digits) return false;
  if (end < s.size() && (s[end] == 'e' || s[end] == 'E')) {
    size_t exp = end + 1;
    if (exp < s.size() && (s[exp] == '+' || s[exp] == '-')) ++exp;
    const size_t exp_end = skip_digits(s, exp);
    if (exp_end == exp) return false;
    end = exp_end;
  }
  return end == s.size();
}

// from_chars does not take a leading '+'.
const char* skip_plus(const std::string& s) { return s.c_str() + (!s.empty() && s[0] == '+'); }

// ===========================================================================
// Precision values: core/precision's resolve_policy decides which are valid.
// The loader only gives them one spelling (Loader::parse_precision) and suggests
// a named precision for a typo.
// ===========================================================================

// Candidates for "did you mean" only; a candidate is offered only if
// resolve_policy accepts it.
const std::vector<std::string> kNamedPrecisions = {"fp32", "tf32", "amp_fp16", "amp_bf16",
                                                   "O0",   "O1",   "O2",       "O3"};

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

// ===========================================================================
// The loader
// ===========================================================================

// Where a cell's value of a key came from, for messages about that cell.
struct Origin {
  YAML::Mark mark;
  std::string path;       // dotted path in the file: "matrix.accumulation[1]"
  bool per_cell = false;  // from the matrix or an include (not the base)
};
using Origins = std::map<std::string, Origin>;

// One value a matrix axis or an include sets.
struct Assignment {
  const KeySpec* spec;
  Value value;
  std::string canonical;
  Origin origin;
};

struct Axis {
  std::vector<Assignment> values;
};

struct Include {
  std::vector<Assignment> assignments;
  Origin origin;  // the entry
};

// key=canonical terms that a cell must all match (exclude and baseline entries).
using Pattern = std::vector<std::pair<std::string, std::string>>;

std::string describe(const Pattern& pattern) {
  std::vector<std::string> terms;
  for (const auto& [key, value] : pattern) terms.push_back(key + ": " + value);
  return "{" + join(terms, ", ") + "}";
}

bool matches(const Cell& cell, const Pattern& pattern) {
  return std::all_of(pattern.begin(), pattern.end(), [&](const auto& term) {
    return cell_value_string(cell, term.first) == term.second;
  });
}

// A cell under construction, with where its values came from.
struct Draft {
  Cell cell;
  Origins origins;
  Origin origin;  // where to point when the cell as a whole is wrong
};

// Where the cell's value of `key` was written: the key itself, or for loss_scale.*
// the whole loss_scale value that set it. nullptr: the default.
const Origin* find_origin(const Draft& draft, const std::string& key) {
  auto it = draft.origins.find(key);
  if (it == draft.origins.end()) it = draft.origins.find(key.substr(0, key.find('.')));
  return it == draft.origins.end() ? nullptr : &it->second;
}

std::string join_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "an empty value";
  }
}

// yaml-cpp marks an empty value ("steps:") at the next token, often the next line;
// point at its key instead.
YAML::Mark mark_of(const YAML::Node& value, const YAML::Node& key) {
  return value.IsNull() ? key.Mark() : value.Mark();
}

YAML::Mark start_of_file() { return YAML::Mark(); }  // line 0, column 0

class Loader {
 public:
  Loader(std::string file, LoadOptions options) : file_(std::move(file)), options_(options) {}

  ExperimentConfig load(const std::string& text);
  Value parse_value(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                    const std::string& path) const;

 private:
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& path,
                         const std::string& message) const {
    // yaml-cpp marks are 0-based; a null mark (-1) becomes 0, "no position".
    throw ConfigError(file_, mark.line + 1, mark.column + 1, path, message);
  }

  YAML::Node parse_yaml(const std::string& text) const;
  std::vector<std::pair<YAML::Node, YAML::Node>> entries(const YAML::Node& map,
                                                         const std::string& path) const;
  void parse_top_level(const YAML::Node& root, ExperimentConfig& experiment);
  std::string parse_name(const YAML::Node& node, const YAML::Mark& mark) const;
  void parse_section(const std::string& section, const YAML::Node& node, const YAML::Node& key);
  void set_base(const KeySpec& spec, const YAML::Node& node, const YAML::Node& key,
                const std::string& path);

  const std::string& expect_scalar(const YAML::Node& node, const YAML::Mark& mark,
                                   const std::string& path, const std::string& expected) const;
  int parse_int(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                const std::string& path) const;
  uint64_t parse_seed(const YAML::Node& node, const YAML::Mark& mark,
                      const std::string& path) const;
  double parse_number(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                      const std::string& path) const;
  std::string parse_choice(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                           const std::string& path) const;
  std::string parse_precision(const YAML::Node& node, const YAML::Mark& mark,
                              const std::string& path) const;
  LossScaleConfig parse_loss_scale(const YAML::Node& node, const YAML::Mark& mark,
                                   const std::string& path) const;
  std::vector<int> parse_step_list(const KeySpec& spec, const YAML::Node& node,
                                   const YAML::Mark& mark, const std::string& path) const;
  LossScaleConfig parse_loss_scale_map(const YAML::Node& node, const YAML::Mark& mark,
                                       const std::string& path) const;
  void check_bounds(const KeySpec& spec, double value, const YAML::Mark& mark,
                    const std::string& path) const;

  const KeySpec& cell_key_spec(const YAML::Node& key, const std::string& path) const;
  Assignment parse_assignment(const KeySpec& spec, const YAML::Node& value, const YAML::Node& key,
                              const std::string& path) const;
  std::vector<Axis> parse_matrix(const YAML::Node& node, const YAML::Mark& mark) const;
  Pattern parse_pattern(const YAML::Node& node, const YAML::Mark& mark,
                        const std::string& path) const;
  std::vector<Pattern> parse_excludes(const YAML::Node& node, const YAML::Mark& mark) const;
  std::vector<Include> parse_includes(const YAML::Node& node, const YAML::Mark& mark) const;

  std::vector<Draft> expand(const std::vector<Axis>& axes) const;
  Draft make_cell(const std::vector<const Assignment*>& assignments, const Origin& origin) const;
  void check_duplicates(const std::vector<Draft>& drafts) const;
  void check_cell(const Draft& draft) const;
  [[noreturn]] void fail_cell(const Draft& draft, const std::vector<std::string>& keys,
                              const std::string& message) const;
  size_t find_baseline(const std::vector<Draft>& drafts, const std::optional<Pattern>& baseline,
                       const YAML::Mark& mark) const;

  std::string file_;
  LoadOptions options_;
  CellConfig base_;
  Origins base_origins_;
  // matrix, exclude, include and baseline as written: key node, value node.
  std::map<std::string, std::pair<YAML::Node, YAML::Node>> experiment_entries_;
};

// ---- YAML structure -------------------------------------------------------

YAML::Node Loader::parse_yaml(const std::string& text) const {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    fail(e.mark, "", "YAML syntax error: " + e.msg);
  }
  if (documents.size() > 1) {
    fail(documents[1].Mark(), "",
         "expected one YAML document, found " + std::to_string(documents.size()));
  }
  return documents.empty() ? YAML::Node() : documents[0];
}

// The entries of a map, in file order. yaml-cpp keeps both copies of a repeated
// key (and lookups see the first), so repeats are caught here.
std::vector<std::pair<YAML::Node, YAML::Node>> Loader::entries(const YAML::Node& map,
                                                               const std::string& path) const {
  std::vector<std::pair<YAML::Node, YAML::Node>> out;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) fail(key.Mark(), path, "expected a key name, got " + describe(key));
    for (const auto& seen : out) {
      if (seen.first.Scalar() == key.Scalar()) {
        fail(key.Mark(), join_path(path, key.Scalar()),
             "duplicate key (first given at line " + std::to_string(seen.first.Mark().line + 1) +
                 ")");
      }
    }
    out.emplace_back(key, it->second);
  }
  return out;
}

// ---- Base configuration -------------------------------------------------

ExperimentConfig Loader::load(const std::string& text) {
  const YAML::Node root = parse_yaml(text);
  if (root.IsNull()) {
    fail(start_of_file(), "", "the file is empty; expected a map with at least 'name'");
  }
  if (!root.IsMap()) {
    fail(root.Mark(), "", "expected a map at the top level, got " + describe(root));
  }
  ExperimentConfig experiment;
  experiment.path = file_;
  parse_top_level(root, experiment);
  experiment.base = base_;

  // A missing key, or one whose value is empty (everything commented out), is absent.
  const auto value_of = [&](const std::string& name) {
    const auto it = experiment_entries_.find(name);
    return it == experiment_entries_.end() ? YAML::Node() : it->second.second;
  };
  const auto mark_of_key = [&](const std::string& name) {
    const auto it = experiment_entries_.find(name);
    return it == experiment_entries_.end() ? start_of_file()
                                           : mark_of(it->second.second, it->second.first);
  };
  const std::vector<Axis> axes = parse_matrix(value_of("matrix"), mark_of_key("matrix"));
  const std::vector<Pattern> excludes = parse_excludes(value_of("exclude"), mark_of_key("exclude"));
  const std::vector<Include> includes = parse_includes(value_of("include"), mark_of_key("include"));
  std::optional<Pattern> baseline;
  if (!value_of("baseline").IsNull()) {
    baseline = parse_pattern(value_of("baseline"), mark_of_key("baseline"), "baseline");
  }

  std::vector<Draft> drafts = expand(axes);
  // Excludes: drop a cell that matches every key of any entry. Includes come after,
  // so they may add back a cell that an exclude dropped.
  const auto excluded = [&](const Draft& draft) {
    return std::any_of(excludes.begin(), excludes.end(),
                       [&](const Pattern& pattern) { return matches(draft.cell, pattern); });
  };
  drafts.erase(std::remove_if(drafts.begin(), drafts.end(), excluded), drafts.end());
  for (const auto& entry : includes) {
    std::vector<const Assignment*> assignments;
    for (const auto& a : entry.assignments) assignments.push_back(&a);
    drafts.push_back(make_cell(assignments, entry.origin));
  }
  if (drafts.empty()) {
    fail(mark_of_key("exclude"), "exclude", "the matrix expands to zero cells after excludes");
  }
  check_duplicates(drafts);
  for (const auto& draft : drafts) check_cell(draft);

  const size_t baseline_index = find_baseline(drafts, baseline, mark_of_key("baseline"));
  drafts[baseline_index].cell.is_baseline = true;
  for (auto& draft : drafts) experiment.cells.push_back(std::move(draft.cell));
  return experiment;
}

void Loader::parse_top_level(const YAML::Node& root, ExperimentConfig& experiment) {
  bool has_name = false;
  for (const auto& [key, value] : entries(root, "")) {
    const std::string& name = key.Scalar();
    if (name == "name") {
      experiment.name = parse_name(value, mark_of(value, key));
      has_name = true;
    } else if (name == "device") {
      experiment.device =
          std::get<std::string>(parse_value(device_spec(), value, mark_of(value, key), name));
    } else if (contains(kSections, name)) {
      parse_section(name, value, key);
    } else if (contains(kExperimentKeys, name)) {
      experiment_entries_[name] = {key, value};  // parsed after the base
    } else if (const KeySpec* spec = find_spec(name); spec && name.find('.') == std::string::npos) {
      set_base(*spec, value, key, name);
    } else if (spec) {
      const std::string section = name.substr(0, name.find('.'));
      fail(key.Mark(), name,
           "dotted keys are for the matrix; in the base write '" + name.substr(section.size() + 1) +
               "' under '" + section + ":'");
    } else {
      fail(key.Mark(), name, unknown_name_message("key", name, top_level_keys()));
    }
  }
  if (!has_name) fail(root.Mark(), "name", "missing required key 'name'");
}

std::string Loader::parse_name(const YAML::Node& node, const YAML::Mark& mark) const {
  const std::string& name = expect_scalar(node, mark, "name", "a name");
  // It names the directory results/<name>/.
  const bool ok =
      !name.empty() && name != "." && name != ".." &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
      });
  if (!ok) {
    fail(mark, "name",
         "invalid name '" + name +
             "': use letters, digits, '_', '.' and '-' (it names results/<name>/)");
  }
  return name;
}

void Loader::parse_section(const std::string& section, const YAML::Node& node,
                           const YAML::Node& key) {
  if (node.IsNull()) return;  // "model:" with everything commented out
  if (!node.IsMap()) {
    fail(mark_of(node, key), section, "expected a map, got " + describe(node));
  }
  for (const auto& [sub_key, value] : entries(node, section)) {
    const std::string path = section + "." + sub_key.Scalar();
    const KeySpec* spec = find_spec(path);
    if (!spec) {
      fail(sub_key.Mark(), path,
           unknown_name_message("key", path, keys_with_prefix(section + ".")));
    }
    set_base(*spec, value, sub_key, path);
  }
}

void Loader::set_base(const KeySpec& spec, const YAML::Node& node, const YAML::Node& key,
                      const std::string& path) {
  const YAML::Mark mark = mark_of(node, key);
  write_field(spec.field(base_), parse_value(spec, node, mark, path));
  base_origins_[spec.key] = Origin{mark, path, false};
}

// ---- Values -----------------------------------------------------------------

Value Loader::parse_value(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                          const std::string& path) const {
  switch (spec.type) {
    case Type::Int:
      return parse_int(spec, node, mark, path);
    case Type::Seed:
      return parse_seed(node, mark, path);
    case Type::Number:
      return parse_number(spec, node, mark, path);
    case Type::Choice:
      return parse_choice(spec, node, mark, path);
    case Type::Precision:
      return parse_precision(node, mark, path);
    case Type::LossScale:
      return parse_loss_scale(node, mark, path);
    case Type::StepList:
      return parse_step_list(spec, node, mark, path);
    case Type::Text: {
      const std::string& text = expect_scalar(node, mark, path, "a string");
      if (text.empty()) fail(mark, path, "expected a non-empty string");
      return text;
    }
  }
  fail(mark, path, "internal error: unhandled key type");
}

const std::string& Loader::expect_scalar(const YAML::Node& node, const YAML::Mark& mark,
                                         const std::string& path,
                                         const std::string& expected) const {
  if (!node.IsScalar()) fail(mark, path, "expected " + expected + ", got " + describe(node));
  return node.Scalar();
}

void Loader::check_bounds(const KeySpec& spec, double value, const YAML::Mark& mark,
                          const std::string& path) const {
  const Bounds& b = spec.bounds;
  const bool low_ok = b.lo_open ? value > b.lo : value >= b.lo;
  const bool high_ok = b.hi_open ? value < b.hi : value <= b.hi;
  if (low_ok && high_ok) return;
  std::string range;
  if (b.hi == std::numeric_limits<double>::infinity()) {
    range = (b.lo_open ? "> " : ">= ") + format_number(b.lo);
  } else {
    range = std::string("in ") + (b.lo_open ? "(" : "[") + format_number(b.lo) + ", " +
            format_number(b.hi) + (b.hi_open ? ")" : "]");
  }
  fail(mark, path, "must be " + range + ", got " + format_number(value));
}

int Loader::parse_int(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                      const std::string& path) const {
  const std::string& text = expect_scalar(node, mark, path, "an integer");
  if (!is_decimal_integer(text)) fail(mark, path, "expected an integer, got '" + text + "'");
  long long value = 0;
  const auto result = std::from_chars(skip_plus(text), text.c_str() + text.size(), value);
  if (result.ec != std::errc() || value < INT_MIN || value > INT_MAX) {
    fail(mark, path, "integer out of range: '" + text + "'");
  }
  check_bounds(spec, static_cast<double>(value), mark, path);
  return static_cast<int>(value);
}

uint64_t Loader::parse_seed(const YAML::Node& node, const YAML::Mark& mark,
                            const std::string& path) const {
  const std::string& text = expect_scalar(node, mark, path, "a non-negative integer");
  if (!is_decimal_integer(text) || text[0] == '-') {
    fail(mark, path, "expected a non-negative integer, got '" + text + "'");
  }
  uint64_t value = 0;
  const auto result = std::from_chars(skip_plus(text), text.c_str() + text.size(), value);
  if (result.ec != std::errc()) fail(mark, path, "integer out of range: '" + text + "'");
  return value;
}

double Loader::parse_number(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                            const std::string& path) const {
  const std::string& text = expect_scalar(node, mark, path, "a number");
  if (!is_decimal_number(text)) fail(mark, path, "expected a number, got '" + text + "'");
  double value = 0;
  const auto result = std::from_chars(skip_plus(text), text.c_str() + text.size(), value);
  if (result.ec != std::errc()) fail(mark, path, "number out of range: '" + text + "'");
  check_bounds(spec, value, mark, path);
  return value;
}

std::string Loader::parse_choice(const KeySpec& spec, const YAML::Node& node,
                                 const YAML::Mark& mark, const std::string& path) const {
  const std::string expected = "one of " + join(spec.choices, ", ");
  const std::string& text = expect_scalar(node, mark, path, expected);
  if (contains(spec.choices, text)) return text;
  for (const auto& [alias, choice] : spec.aliases) {
    if (text == alias) return choice;
  }
  std::string message = "expected " + expected + ", got '" + text + "'";
  if (const auto suggestion = nearest_name(text, spec.choices)) {
    message += "; did you mean '" + *suggestion + "'?";
  }
  fail(mark, path, message);
}

// The canonical spelling drops blanks around ',' and '=' (so that "p = f32, c = f16"
// and "p=f32,c=f16" are one cell id); whether the value means anything is up to
// resolve_policy, which is given the canonical string, as the trainer will be. An
// empty part (",," or a trailing ',') is rejected here: dropping it would give one
// policy two spellings.
std::string Loader::parse_precision(const YAML::Node& node, const YAML::Mark& mark,
                                    const std::string& path) const {
  const std::string& text = expect_scalar(node, mark, path, "a precision");
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string part = trim(text.substr(start, comma - start));
    const auto eq = part.find('=');
    if (eq != std::string::npos) part = trim(part.substr(0, eq)) + "=" + trim(part.substr(eq + 1));
    parts.push_back(std::move(part));
    if (comma == text.size()) break;
    start = comma + 1;
  }
  const std::string value = join(parts, ",");
  if (parts.size() > 1 && contains(parts, "")) {
    fail(mark, path, "precision policy '" + text + "' has an empty part (a stray ',')");
  }
  try {
    resolve_policy(value);
  } catch (const std::invalid_argument& e) {
    std::string message = e.what();
    if (message.find("did you mean") == std::string::npos && value.find('=') == std::string::npos) {
      std::vector<std::string> valid;  // the named precisions that resolve today
      for (const auto& name : kNamedPrecisions) {
        try {
          resolve_policy(name);
          valid.push_back(name);
        } catch (const std::invalid_argument&) {
        }
      }
      const auto suggestion = nearest_name(value, valid);
      if (suggestion && *suggestion != value) message += "; did you mean '" + *suggestion + "'?";
    }
    fail(mark, path, message);
  }
  return value;
}

// A YAML list of optimizer steps ([3, 10], or [] for none): each an integer within
// the key's bounds, none twice. Kept sorted, so that [10, 3] and [3, 10] are one value.
std::vector<int> Loader::parse_step_list(const KeySpec& spec, const YAML::Node& node,
                                         const YAML::Mark& mark, const std::string& path) const {
  if (!node.IsSequence()) {
    fail(mark, path,
         "expected a list of optimizer steps such as [3, 10] (or [] for none), got " +
             describe(node));
  }
  std::vector<std::pair<int, std::string>> steps;  // step, its path
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const YAML::Mark item_mark = item.IsNull() ? mark : item.Mark();
    const int step = parse_int(spec, item, item_mark, item_path);
    for (const auto& [earlier, earlier_path] : steps) {
      if (earlier == step) {
        fail(item_mark, item_path,
             "step " + std::to_string(step) + " is listed twice (same as " + earlier_path + ")");
      }
    }
    steps.emplace_back(step, item_path);
  }
  std::vector<int> out;
  for (const auto& s : steps) out.push_back(s.first);
  std::sort(out.begin(), out.end());
  return out;
}

// A string mode, a number (static scale), or a map of loss_scale.* keys. A value
// replaces the whole loss scale: fields it does not give take their defaults.
LossScaleConfig Loader::parse_loss_scale(const YAML::Node& node, const YAML::Mark& mark,
                                         const std::string& path) const {
  if (node.IsMap()) return parse_loss_scale_map(node, mark, path);
  const std::string expected = "none, static, dynamic, a number (static scale) or a map";
  const std::string& text = expect_scalar(node, mark, path, expected);
  LossScaleConfig loss_scale;
  const KeySpec& mode = *find_spec("loss_scale.mode");
  if (contains(mode.choices, text)) {
    loss_scale.mode = text;
  } else if (is_decimal_number(text)) {
    loss_scale.mode = "static";
    loss_scale.value =
        std::get<double>(parse_value(*find_spec("loss_scale.value"), node, mark, path));
  } else {
    std::string message = "expected " + expected + ", got '" + text + "'";
    if (const auto suggestion = nearest_name(text, mode.choices)) {
      message += "; did you mean '" + *suggestion + "'?";
    }
    fail(mark, path, message);
  }
  return loss_scale;
}

LossScaleConfig Loader::parse_loss_scale_map(const YAML::Node& node, const YAML::Mark& mark,
                                             const std::string& path) const {
  // Written through a CellConfig so that the table's accessors can be reused.
  CellConfig holder;
  std::vector<std::pair<std::string, YAML::Node>> given;  // key -> its key node
  for (const auto& [key, value] : entries(node, path)) {
    const std::string spec_key = "loss_scale." + key.Scalar();
    const std::string key_path = path + "." + key.Scalar();
    const KeySpec* spec = find_spec(spec_key);
    if (!spec) {
      fail(key.Mark(), key_path,
           unknown_name_message("key", spec_key, keys_with_prefix("loss_scale.")));
    }
    write_field(spec->field(holder), parse_value(*spec, value, mark_of(value, key), key_path));
    given.emplace_back(key.Scalar(), key);
  }
  const std::string& mode = holder.loss_scale.mode;
  const bool has_mode =
      std::any_of(given.begin(), given.end(), [](const auto& g) { return g.first == "mode"; });
  if (!has_mode) fail(mark, path, "a loss_scale map needs 'mode' (none, static or dynamic)");
  // A field of another mode would be silently ignored by the trainer.
  for (const auto& [key, key_node] : given) {
    if (key == "mode") continue;
    const std::string owner = key == "value" ? "static" : "dynamic";
    if (owner != mode) {
      fail(key_node.Mark(), path + "." + key,
           "'" + key + "' applies to mode " + owner + ", not " + mode);
    }
  }
  return holder.loss_scale;
}

// ---- Matrix, exclude, include, baseline -------------------------------------

// The spec of a key that varies per cell (matrix axis, include/exclude/baseline key).
const KeySpec& Loader::cell_key_spec(const YAML::Node& key, const std::string& path) const {
  const std::string& name = key.Scalar();
  if (const KeySpec* spec = find_spec(name)) return *spec;
  if (contains(kSections, name)) {
    fail(key.Mark(), path,
         "'" + name + "' is a section; name one of its keys, such as '" +
             keys_with_prefix(name + ".").front() + "'");
  }
  if (contains(kExperimentKeys, name)) {
    fail(key.Mark(), path, "'" + name + "' applies to the whole experiment, not to a cell");
  }
  fail(key.Mark(), path, unknown_name_message("key", name, cell_keys()));
}

Assignment Loader::parse_assignment(const KeySpec& spec, const YAML::Node& value,
                                    const YAML::Node& key, const std::string& path) const {
  const YAML::Mark mark = mark_of(value, key);
  Value parsed = parse_value(spec, value, mark, path);
  std::string text = canonical(parsed);
  return Assignment{&spec, std::move(parsed), std::move(text), Origin{mark, path, true}};
}

std::vector<Axis> Loader::parse_matrix(const YAML::Node& node, const YAML::Mark& mark) const {
  std::vector<Axis> axes;
  if (node.IsNull()) return axes;
  if (!node.IsMap()) {
    fail(mark, "matrix", "expected a map of axis -> list of values, got " + describe(node));
  }
  for (const auto& [key, values] : entries(node, "matrix")) {
    const std::string path = "matrix." + key.Scalar();
    const KeySpec& spec = cell_key_spec(key, path);
    if (!values.IsSequence()) {
      fail(mark_of(values, key), path,
           "expected a list of values such as [a, b], got " + describe(values));
    }
    if (values.size() == 0) fail(values.Mark(), path, "the axis has no values");
    Axis axis;
    for (size_t i = 0; i < values.size(); ++i) {
      const std::string item_path = path + "[" + std::to_string(i) + "]";
      if (spec.type == Type::StepList && !values[i].IsSequence()) {
        // "inject_nonfinite: [5, 9]" as an axis: the values of this axis are lists.
        fail(mark_of(values[i], key), item_path,
             "expected a list of steps such as [5], got " + describe(values[i]) + "; an " +
                 spec.key + " axis is a list of lists, such as [[], [5], [5, 9]]");
      }
      Assignment value = parse_assignment(spec, values[i], key, item_path);
      for (const auto& earlier : axis.values) {
        if (earlier.canonical == value.canonical) {
          fail(value.origin.mark, item_path,
               "duplicate value '" + value.canonical + "' (same as " + earlier.origin.path +
                   "); it would give duplicate cell ids");
        }
      }
      axis.values.push_back(std::move(value));
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

Pattern Loader::parse_pattern(const YAML::Node& node, const YAML::Mark& mark,
                              const std::string& path) const {
  if (!node.IsMap() || node.size() == 0) {
    fail(mark, path,
         "expected a map of key: value such as {precision: fp32}, got " +
             (node.IsMap() ? std::string("an empty map") : describe(node)));
  }
  Pattern pattern;
  for (const auto& [key, value] : entries(node, path)) {
    const std::string key_path = path + "." + key.Scalar();
    const KeySpec& spec = cell_key_spec(key, key_path);
    pattern.emplace_back(spec.key, parse_assignment(spec, value, key, key_path).canonical);
  }
  return pattern;
}

std::vector<Pattern> Loader::parse_excludes(const YAML::Node& node, const YAML::Mark& mark) const {
  std::vector<Pattern> excludes;
  if (node.IsNull()) return excludes;
  if (!node.IsSequence()) fail(mark, "exclude", "expected a list of maps, got " + describe(node));
  for (size_t i = 0; i < node.size(); ++i) {
    excludes.push_back(
        parse_pattern(node[i], node[i].Mark(), "exclude[" + std::to_string(i) + "]"));
  }
  return excludes;
}

std::vector<Include> Loader::parse_includes(const YAML::Node& node, const YAML::Mark& mark) const {
  std::vector<Include> includes;
  if (node.IsNull()) return includes;
  if (!node.IsSequence()) fail(mark, "include", "expected a list of maps, got " + describe(node));
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node entry = node[i];
    const std::string path = "include[" + std::to_string(i) + "]";
    if (!entry.IsMap() || entry.size() == 0) {
      fail(entry.Mark(), path,
           "expected a map of key: value such as {batch_size: 512}, got " +
               (entry.IsMap() ? std::string("an empty map") : describe(entry)));
    }
    Include include{{}, Origin{entry.Mark(), path, true}};
    for (const auto& [key, value] : entries(entry, path)) {
      const std::string key_path = path + "." + key.Scalar();
      include.assignments.push_back(
          parse_assignment(cell_key_spec(key, key_path), value, key, key_path));
    }
    includes.push_back(std::move(include));
  }
  return includes;
}

// Cells beyond this are almost certainly a mistake (and would take days to run).
constexpr size_t kMaxCells = 100000;

// The Cartesian product in the order the axes are written: the first axis varies
// slowest. No axes: the one cell "base".
std::vector<Draft> Loader::expand(const std::vector<Axis>& axes) const {
  if (axes.empty()) return {make_cell({}, Origin{start_of_file(), "", false})};
  size_t count = 1;
  for (const auto& axis : axes) {
    count *= axis.values.size();
    if (count > kMaxCells) {
      fail(axis.values.front().origin.mark, "matrix",
           "the matrix expands to more than " + std::to_string(kMaxCells) + " cells");
    }
  }
  std::vector<Draft> drafts;
  std::vector<size_t> index(axes.size(), 0);  // an odometer over the axes
  for (size_t n = 0; n < count; ++n) {
    std::vector<const Assignment*> assignments;
    for (size_t a = 0; a < axes.size(); ++a) assignments.push_back(&axes[a].values[index[a]]);
    drafts.push_back(make_cell(assignments, assignments.back()->origin));
    for (size_t a = axes.size(); a-- > 0;) {  // advance the last axis first
      if (++index[a] < axes[a].values.size()) break;
      index[a] = 0;
    }
  }
  return drafts;
}

Draft Loader::make_cell(const std::vector<const Assignment*>& assignments,
                        const Origin& origin) const {
  Draft draft{Cell{}, base_origins_, origin};
  draft.cell.config = base_;
  std::vector<std::string> terms;
  for (const Assignment* a : assignments) {
    write_field(a->spec->field(draft.cell.config), a->value);
    // A whole loss_scale replaces its fields, and where they came from.
    const std::string prefix = a->spec->key + ".";
    for (auto it = draft.origins.begin(); it != draft.origins.end();) {
      it = starts_with(it->first, prefix) ? draft.origins.erase(it) : std::next(it);
    }
    draft.origins[a->spec->key] = a->origin;
    draft.cell.axes.emplace_back(a->spec->key, a->canonical);
    terms.push_back(a->spec->key + "=" + a->canonical);
  }
  draft.cell.id = terms.empty() ? "base" : join(terms, ",");
  draft.cell.slug = cell_slug(draft.cell.id);
  return draft;
}

// Two cells with the same id, or the same configuration, would run the same thing
// twice and collide in results/ (an include that repeats a matrix cell, or a
// loss_scale axis next to loss_scale.value).
void Loader::check_duplicates(const std::vector<Draft>& drafts) const {
  std::unordered_map<std::string, size_t> ids, configs;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const Draft& draft = drafts[i];
    const std::string where = draft.origin.path.empty() ? "matrix" : draft.origin.path;
    if (const auto [it, fresh] = ids.emplace(draft.cell.id, i); !fresh) {
      fail(draft.origin.mark, where, "duplicate cell id '" + draft.cell.id + "'");
    }
    const std::string config = cell_config_to_json(draft.cell.config).dump();
    if (const auto [it, fresh] = configs.emplace(config, i); !fresh) {
      fail(draft.origin.mark, where,
           "duplicate cell: '" + draft.cell.id + "' has the same configuration as '" +
               drafts[it->second].cell.id + "'");
    }
  }
}

// Checks that involve more than one key, or the not-supported-yet table, on the
// resolved configuration of one cell. Values are only rejected where a cell uses
// them: an excluded combination is never checked.
void Loader::check_cell(const Draft& draft) const {
  const CellConfig& c = draft.cell.config;
  if (c.warmup_steps >= c.steps) {
    fail_cell(draft, {"warmup_steps", "steps"},
              "warmup_steps (" + std::to_string(c.warmup_steps) + ") must be less than steps (" +
                  std::to_string(c.steps) + ")");
  }
  if (c.batch_size % c.accumulation != 0) {
    fail_cell(draft, {"accumulation", "batch_size"},
              "batch_size (" + std::to_string(c.batch_size) +
                  ") is not divisible by accumulation (" + std::to_string(c.accumulation) + ")");
  }
  for (const int step : c.inject_nonfinite) {
    if (step > c.steps) {
      fail_cell(draft, {"inject_nonfinite", "steps"},
                "inject_nonfinite step " + std::to_string(step) + " is beyond steps (" +
                    std::to_string(c.steps) + ")");
    }
  }
  if (c.loss_scale.max > 0 && c.loss_scale.min > c.loss_scale.max) {
    fail_cell(draft, {"loss_scale.min", "loss_scale.max"},
              "loss_scale min (" + format_number(c.loss_scale.min) + ") is above max (" +
                  format_number(c.loss_scale.max) + ")");
  }
  if (options_.reject_unsupported) {
    for (const auto& row : not_supported_yet_table()) {
      const std::string value = config_value_string(c, row.key);
      if (const auto reason = unsupported_reason(row.key, value)) {
        const Origin* origin = find_origin(draft, row.key);
        if (!origin) fail(YAML::Mark::null_mark(), row.key, *reason);  // a default: not reached
        fail(origin->mark, origin->path, *reason);
      }
    }
  }
  // Each model reads its own kind of data.
  const bool token_data = c.data.kind == "markov" || c.data.kind == "text";
  if (c.model.kind == "bert" && !token_data) {
    fail_cell(draft, {"data.kind", "model.kind"},
              "model.kind bert needs token data: data.kind markov or text (got " + c.data.kind + ")");
  }
  if (c.model.kind == "mlp" && token_data) {
    fail_cell(draft, {"data.kind", "model.kind"},
              "model.kind mlp needs data.kind teacher (got " + c.data.kind + ")");
  }
  if (c.optimizer.warmup >= c.steps && c.optimizer.warmup > 0) {
    fail_cell(draft, {"optimizer.warmup", "steps"},
              "optimizer.warmup (" + std::to_string(c.optimizer.warmup) + ") must be less than steps (" +
                  std::to_string(c.steps) + ")");
  }
  if (c.model.kind == "mlp" && c.checkpointing != "off") {
    fail_cell(draft, {"checkpointing", "model.kind"},
              "checkpointing '" + c.checkpointing + "' is implemented for model.kind bert; the MLP keeps "
              "every activation (use checkpointing: off)");
  }
  if (c.data.kind == "text" && c.data.path.empty()) {
    fail_cell(draft, {"data.kind", "data.path"}, "data.kind text needs data.path (a text file)");
  }
}

// Points at the value most specific to this cell among `keys`: one the matrix or an
// include set, else one the base set, else (defaults only) the first key.
void Loader::fail_cell(const Draft& draft, const std::vector<std::string>& keys,
                       const std::string& message) const {
  const Origin* chosen = nullptr;
  for (const bool per_cell : {true, false}) {
    for (const auto& key : keys) {
      const Origin* origin = find_origin(draft, key);
      if (!chosen && origin && origin->per_cell == per_cell) chosen = origin;
    }
  }
  const std::string text = "cell '" + draft.cell.id + "': " + message;
  if (!chosen) fail(YAML::Mark::null_mark(), keys.front(), text);
  fail(chosen->mark, chosen->path, text);
}

size_t Loader::find_baseline(const std::vector<Draft>& drafts,
                             const std::optional<Pattern>& baseline, const YAML::Mark& mark) const {
  if (!baseline) return 0;  // default: the first cell
  std::vector<size_t> found;
  std::vector<std::string> all_ids, found_ids;
  for (size_t i = 0; i < drafts.size(); ++i) {
    all_ids.push_back("'" + drafts[i].cell.id + "'");
    if (matches(drafts[i].cell, *baseline)) {
      found.push_back(i);
      found_ids.push_back(all_ids.back());
    }
  }
  if (found.empty()) {
    fail(mark, "baseline",
         describe(*baseline) + " matches no cell (cells: " + join(all_ids, ", ") + ")");
  }
  if (found.size() > 1) {
    fail(mark, "baseline",
         describe(*baseline) + " matches " + std::to_string(found.size()) + " cells (" +
             join(found_ids, ", ") + "); add keys so that it matches exactly one");
  }
  return found.front();
}

}  // namespace

// ===========================================================================
// Public API
// ===========================================================================

ExperimentConfig load_experiment_from_string(const std::string& yaml_text, const std::string& path,
                                             const LoadOptions& options) {
  return Loader(path, options).load(yaml_text);
}

ExperimentConfig load_experiment_from_string(const std::string& yaml_text,
                                             const std::string& path) {
  return load_experiment_from_string(yaml_text, path, LoadOptions{});
}

ExperimentConfig load_experiment(const std::string& path, const LoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, 0, 0, "", "cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path, 0, 0, "", "cannot read the file");
  return load_experiment_from_string(text.str(), path, options);
}

ExperimentConfig load_experiment(const std::string& path) {
  return load_experiment(path, LoadOptions{});
}

std::string config_value_string(const CellConfig& config, const std::string& key) {
  const KeySpec* spec = find_spec(key);
  if (!spec) throw std::invalid_argument(unknown_name_message("key", key, cell_keys()));
  return canonical(read_key(*spec, config));
}

std::string canonical_value_string(const std::string& key, const std::string& text) {
  const KeySpec* spec = find_spec(key);
  if (!spec) throw std::invalid_argument(unknown_name_message("key", key, cell_keys()));
  try {
    // A plain scalar, as if written in the file; a step list as YAML ("[5, 9]").
    const YAML::Node node = spec->type == Type::StepList ? YAML::Load(text) : YAML::Node(text);
    return canonical(Loader("", LoadOptions{}).parse_value(*spec, node, node.Mark(), key));
  } catch (const ConfigError& e) {
    throw std::invalid_argument("key '" + key + "': " + e.message());
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("key '" + key + "': '" + text + "' is not a YAML list: " + e.msg);
  }
}

nlohmann::json cell_config_to_json(const CellConfig& config) {
  // Built from the table so that it always has every key of the YAML: "optimizer.lr"
  // goes to /optimizer/lr. loss_scale comes out as the map of its loss_scale.* keys.
  nlohmann::json json = nlohmann::json::object();
  for (const auto& spec : schema()) {
    if (spec.type == Type::LossScale) continue;
    std::string pointer = "/" + spec.key;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    json[nlohmann::json::json_pointer(pointer)] = std::visit(
        [](const auto& v) -> nlohmann::json {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, LossScaleConfig>) {
            return nullptr;  // not reached: skipped above
          } else {
            return v;
          }
        },
        read_key(spec, config));
  }
  return json;
}

}  // namespace mpb
