// The experiment-file loader (docs/CONFIG.md is the contract): the YAML
// structure, positions and the experiment-level keys. Every value's text is
// parsed by the schema (config/schema.h); the matrix is expanded by
// runner/experiment/matrix.cpp.
//
// Loading runs in this order, each step failing with a ConfigError that names
// file:line:col and the dotted key:
//   1. YAML syntax;  2. top-level keys, name, device and the base values;
//   3. matrix axes and include/exclude/baseline entries (every value validated like
//      a base value);  4. Cartesian product, excludes, includes, duplicates;
//   5. per-cell checks (warmup < steps, accumulation divides batch_size,
//      inject_nonfinite steps <= steps, the "not supported yet" table);  6. the baseline.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <unordered_map>

#include "runner/experiment/config.h"
#include "runner/experiment/config_limits.h"
#include "runner/experiment/control_characters.h"
#include "runner/experiment/convergence_settings.h"
#include "runner/experiment/matrix.h"
#include "runner/experiment/matrix_checks.h"
#include "runner/io/yaml_documents.h"

namespace mpb {

namespace {

using schema::contains;
using schema::KeySpec;
using schema::Type;
using schema::Value;

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

// yaml-cpp marks are 0-based; a null mark (-1) becomes 0, "no position".
Where where(const YAML::Mark& mark) { return Where{mark.line + 1, mark.column + 1}; }

class Loader {
 public:
  Loader(std::string file, LoadOptions options) : file_(std::move(file)), options_(options) {}

  ExperimentConfig load(const std::string& text);
  Value parse_value(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                    const std::string& path) const;

 private:
  [[noreturn]] void fail(const Where& at, const std::string& path, const std::string& message) const {
    throw ConfigError(file_, at.line, at.col, path, message);
  }
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& path,
                         const std::string& message) const {
    fail(where(mark), path, message);
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
  Value parse_scalar(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                     const std::string& path) const;
  std::vector<int> parse_step_list(const KeySpec& spec, const YAML::Node& node,
                                   const YAML::Mark& mark, const std::string& path) const;
  std::vector<std::string> parse_name_list(const KeySpec& spec, const YAML::Node& node,
                                           const YAML::Mark& mark, const std::string& path) const;
  LossScaleConfig parse_loss_scale_map(const YAML::Node& node, const YAML::Mark& mark,
                                       const std::string& path) const;

  const KeySpec& cell_key_spec(const YAML::Node& key, const std::string& path) const;
  Assignment parse_assignment(const KeySpec& spec, const YAML::Node& value, const YAML::Node& key,
                              const std::string& path) const;
  std::vector<Axis> parse_matrix(const YAML::Node& node, const YAML::Mark& mark) const;
  // exclude / include: false when the key is absent (null), true for a list,
  // an error otherwise.
  bool is_list_of_maps(const YAML::Node& node, const YAML::Mark& mark, const char* key) const;
  // A baseline, exclude or include entry is a non-empty map; `example` shows
  // one in the error.
  void require_entry_map(const YAML::Node& node, const YAML::Mark& mark, const std::string& path,
                         const char* example) const;
  Pattern parse_pattern(const YAML::Node& node, const YAML::Mark& mark,
                        const std::string& path) const;
  std::vector<Pattern> parse_excludes(const YAML::Node& node, const YAML::Mark& mark, std::vector<Where>* at) const;
  std::vector<Include> parse_includes(const YAML::Node& node, const YAML::Mark& mark) const;

  std::string file_;
  LoadOptions options_;
  MatrixSpec matrix_;  // the base, then the matrix, excludes, includes and baseline
  // matrix, exclude, include and baseline as written: key node, value node.
  std::map<std::string, std::pair<YAML::Node, YAML::Node>> experiment_entries_;
};

// ---- YAML structure -------------------------------------------------------

YAML::Node Loader::parse_yaml(const std::string& text) const {
  std::vector<YAML::Node> documents;
  try {
    documents = load_yaml_documents(text);  // not LoadAll: it can hang (yaml_documents.h)
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
// key (and lookups see the first), so repeats are caught here, with a hash map:
// a scan of the earlier keys made a 40,000-key map take seconds to minutes.
std::vector<std::pair<YAML::Node, YAML::Node>> Loader::entries(const YAML::Node& map,
                                                               const std::string& path) const {
  std::vector<std::pair<YAML::Node, YAML::Node>> out;
  std::unordered_map<std::string, int> first_line;  // key -> the line it was first given at
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) fail(key.Mark(), path, "expected a key name, got " + describe(key));
    const auto [first, fresh] = first_line.emplace(key.Scalar(), key.Mark().line + 1);
    if (!fresh) {
      fail(key.Mark(), join_path(path, key.Scalar()),
           "duplicate key (first given at line " + std::to_string(first->second) + ")");
    }
    out.emplace_back(key, it->second);
  }
  return out;
}

// ---- Base configuration -------------------------------------------------

ExperimentConfig Loader::load(const std::string& text) {
  if (text.size() > kMaxFileBytes) {
    throw ConfigError(file_, 0, 0, "",
                      "the file is " + std::to_string(text.size()) + " bytes; experiment files are limited to " +
                          std::to_string(kMaxFileBytes) + " bytes (1 MiB)");
  }
  const YAML::Node root = parse_yaml(text);
  refuse_control_characters(root, file_);  // runner/experiment/control_characters.h: before any value is echoed
  if (root.IsNull()) {
    fail(start_of_file(), "", "the file is empty; expected a map with at least 'name'");
  }
  if (!root.IsMap()) {
    fail(root.Mark(), "", "expected a map at the top level, got " + describe(root));
  }
  ExperimentConfig experiment;
  experiment.path = file_;
  parse_top_level(root, experiment);
  experiment.base = matrix_.base;

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
  matrix_.axes = parse_matrix(value_of("matrix"), mark_of_key("matrix"));
  matrix_.excludes = parse_excludes(value_of("exclude"), mark_of_key("exclude"), &matrix_.excludes_at);
  matrix_.includes = parse_includes(value_of("include"), mark_of_key("include"));
  if (!value_of("baseline").IsNull()) {
    matrix_.baseline = parse_pattern(value_of("baseline"), mark_of_key("baseline"), "baseline");
  }
  matrix_.exclude_at = where(mark_of_key("exclude"));
  matrix_.baseline_at = where(mark_of_key("baseline"));
  experiment.cells = expand_matrix(file_, matrix_, options_);
  for (Cell& cell : experiment.cells) cell.convergence = experiment.convergence;
  return experiment;
}

void Loader::parse_top_level(const YAML::Node& root, ExperimentConfig& experiment) {
  bool has_name = false;
  for (const auto& [key, value] : entries(root, "")) {
    const std::string& name = key.Scalar();
    if (name == "name") {
      experiment.name = parse_name(value, mark_of(value, key));
      has_name = true;
    } else if (name == "convergence") {
      experiment.convergence = parse_convergence_settings(value, file_);
    } else if (name == "device") {
      experiment.device = std::get<std::string>(
          parse_value(schema::device_spec(), value, mark_of(value, key), name));
    } else if (contains(schema::kSections, name)) {
      parse_section(name, value, key);
    } else if (contains(schema::kExperimentKeys, name)) {
      experiment_entries_[name] = {key, value};  // parsed after the base
    } else if (const KeySpec* spec = schema::find_spec(name);
               spec && name.find('.') == std::string::npos) {
      set_base(*spec, value, key, name);
    } else if (spec) {
      const std::string section = name.substr(0, name.find('.'));
      fail(key.Mark(), name,
           "dotted keys are for the matrix; in the base write '" + name.substr(section.size() + 1) +
               "' under '" + section + ":'");
    } else {
      fail(key.Mark(), name, unknown_name_message("key", name, schema::top_level_keys()));
    }
  }
  if (!has_name) fail(root.Mark(), "name", "missing required key 'name'");
}

std::string Loader::parse_name(const YAML::Node& node, const YAML::Mark& mark) const {
  const std::string& name = expect_scalar(node, mark, "name", "a name");
  // It names the directory results/<name>/.
  if (name.size() > kMaxNameChars) {
    fail(mark, "name",
         "the name has " + std::to_string(name.size()) + " characters; at most " +
             std::to_string(kMaxNameChars) + " (it names results/<name>/)");
  }
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
    const KeySpec* spec = schema::find_spec(path);
    if (!spec) {
      fail(sub_key.Mark(), path,
           unknown_name_message("key", path, schema::keys_with_prefix(section + ".")));
    }
    set_base(*spec, value, sub_key, path);
  }
}

void Loader::set_base(const KeySpec& spec, const YAML::Node& node, const YAML::Node& key,
                      const std::string& path) {
  const YAML::Mark mark = mark_of(node, key);
  spec.set(matrix_.base, parse_value(spec, node, mark, path));
  matrix_.base_origins[spec.key] = Origin{where(mark), path, false};
}

// ---- Values -----------------------------------------------------------------

// The YAML shape of a value (a scalar, a list of steps, a loss_scale map); the
// schema parses the text.
Value Loader::parse_value(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                          const std::string& path) const {
  if (spec.type == Type::StepList) return parse_step_list(spec, node, mark, path);
  if (spec.type == Type::NameList) return parse_name_list(spec, node, mark, path);
  if (spec.type == Type::LossScale && node.IsMap()) return parse_loss_scale_map(node, mark, path);
  return parse_scalar(spec, node, mark, path);
}

const std::string& Loader::expect_scalar(const YAML::Node& node, const YAML::Mark& mark,
                                         const std::string& path,
                                         const std::string& expected) const {
  if (!node.IsScalar()) fail(mark, path, "expected " + expected + ", got " + describe(node));
  return node.Scalar();
}

Value Loader::parse_scalar(const KeySpec& spec, const YAML::Node& node, const YAML::Mark& mark,
                           const std::string& path) const {
  const std::string& text = expect_scalar(node, mark, path, schema::expected_form(spec));
  try {
    return spec.type == Type::StepList ? Value(schema::parse_int(spec, text))
                                       : schema::parse_scalar(spec, text);
  } catch (const schema::ValueError& e) {
    fail(mark, path, e.what());
  }
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
  const auto item_path = [&](size_t i) { return path + "[" + std::to_string(i) + "]"; };
  std::vector<int> out;
  std::unordered_map<int, size_t> index_of;  // step -> its index in the list
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const YAML::Mark item_mark = item.IsNull() ? mark : item.Mark();
    const int step = std::get<int>(parse_scalar(spec, item, item_mark, item_path(i)));
    if (const auto [earlier, fresh] = index_of.emplace(step, i); !fresh) {
      fail(item_mark, item_path(i),
           "step " + std::to_string(step) + " is listed twice (same as " + item_path(earlier->second) +
               ")");
    }
    out.push_back(step);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A YAML list of names from the key's choices ([bias, layernorm], or [] for none),
// none twice. Kept in the choices' order, so that [layernorm, bias] and [bias,
// layernorm] are one value.
std::vector<std::string> Loader::parse_name_list(const KeySpec& spec, const YAML::Node& node,
                                                 const YAML::Mark& mark, const std::string& path) const {
  if (!node.IsSequence()) {
    fail(mark, path,
         "expected a list of names such as [" + schema::join(spec.choices, ", ") + "] (or [] for none), got " +
             describe(node));
  }
  std::unordered_map<std::string, size_t> index_of;  // name -> its index in the list
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const YAML::Mark item_mark = item.IsNull() ? mark : item.Mark();
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const auto name = std::get<std::string>(parse_scalar(spec, item, item_mark, item_path));
    if (const auto [earlier, fresh] = index_of.emplace(name, i); !fresh) {
      fail(item_mark, item_path,
           "'" + name + "' is listed twice (same as " + path + "[" + std::to_string(earlier->second) + "])");
    }
  }
  std::vector<std::string> out;
  for (const auto& choice : spec.choices)
    if (index_of.count(choice)) out.push_back(choice);
  return out;
}

// A map of loss_scale.* keys; like every loss_scale value it replaces the whole
// loss scale: fields it does not give take their defaults.
LossScaleConfig Loader::parse_loss_scale_map(const YAML::Node& node, const YAML::Mark& mark,
                                             const std::string& path) const {
  // Written through a CellConfig so that the table's accessors can be reused.
  CellConfig holder;
  std::vector<std::pair<std::string, YAML::Node>> given;  // key -> its key node
  for (const auto& [key, value] : entries(node, path)) {
    const std::string spec_key = "loss_scale." + key.Scalar();
    const std::string key_path = path + "." + key.Scalar();
    const KeySpec* spec = schema::find_spec(spec_key);
    if (!spec) {
      fail(key.Mark(), key_path,
           unknown_name_message("key", spec_key, schema::keys_with_prefix("loss_scale.")));
    }
    spec->set(holder, parse_value(*spec, value, mark_of(value, key), key_path));
    given.emplace_back(key.Scalar(), key);
  }
  const std::string mode = config_value_string(holder, "loss_scale.mode");
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
  if (const KeySpec* spec = schema::find_spec(name)) return *spec;
  if (contains(schema::kSections, name)) {
    fail(key.Mark(), path,
         "'" + name + "' is a section; name one of its keys, such as '" +
             schema::keys_with_prefix(name + ".").front() + "'");
  }
  if (contains(schema::kExperimentKeys, name)) {
    fail(key.Mark(), path, "'" + name + "' applies to the whole experiment, not to a cell");
  }
  fail(key.Mark(), path, unknown_name_message("key", name, schema::cell_keys()));
}

Assignment Loader::parse_assignment(const KeySpec& spec, const YAML::Node& value,
                                    const YAML::Node& key, const std::string& path) const {
  const YAML::Mark mark = mark_of(value, key);
  Value parsed = parse_value(spec, value, mark, path);
  std::string text = schema::canonical(parsed);
  return Assignment{&spec, std::move(parsed), std::move(text), Origin{where(mark), path, true}};
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
    if (values.size() > kMaxAxisValues) {
      fail(values.Mark(), path,
           "the axis has " + std::to_string(values.size()) + " values; at most " +
               std::to_string(kMaxAxisValues) + " (more would exceed the " + std::to_string(kMaxCells) +
               "-cell limit on its own)");
    }
    Axis axis;
    std::unordered_map<std::string, size_t> index_of;  // canonical value -> its index
    for (size_t i = 0; i < values.size(); ++i) {
      const std::string item_path = path + "[" + std::to_string(i) + "]";
      if (spec.type == Type::StepList && !values[i].IsSequence()) {
        // "inject_nonfinite: [5, 9]" as an axis: the values of this axis are lists.
        fail(mark_of(values[i], key), item_path,
             "expected a list of steps such as [5], got " + describe(values[i]) + "; an " +
                 spec.key + " axis is a list of lists, such as [[], [5], [5, 9]]");
      }
      if (spec.type == Type::NameList && !values[i].IsSequence()) {
        fail(mark_of(values[i], key), item_path,
             "expected a list of names such as [" + spec.choices.front() + "], got " + describe(values[i]) +
                 "; an " + spec.key + " axis is a list of lists, such as [[], [" +
                 schema::join(spec.choices, ", ") + "]]");
      }
      Assignment value = parse_assignment(spec, values[i], key, item_path);
      if (const auto [earlier, fresh] = index_of.emplace(value.canonical, i); !fresh) {
        fail(value.origin.where, item_path,
             "duplicate value '" + value.canonical + "' (same as " +
                 axis.values[earlier->second].origin.path + "); it would give duplicate cell ids");
      }
      axis.values.push_back(std::move(value));
    }
    if (spec.key == "precision") check_precision_axis(file_, axis);
    axes.push_back(std::move(axis));
  }
  return axes;
}

bool Loader::is_list_of_maps(const YAML::Node& node, const YAML::Mark& mark, const char* key) const {
  if (node.IsNull()) return false;
  if (!node.IsSequence()) fail(mark, key, "expected a list of maps, got " + describe(node));
  return true;
}

void Loader::require_entry_map(const YAML::Node& node, const YAML::Mark& mark, const std::string& path,
                               const char* example) const {
  if (!node.IsMap() || node.size() == 0) {
    fail(mark, path,
         std::string("expected a map of key: value such as ") + example + ", got " +
             (node.IsMap() ? std::string("an empty map") : describe(node)));
  }
}

Pattern Loader::parse_pattern(const YAML::Node& node, const YAML::Mark& mark,
                              const std::string& path) const {
  require_entry_map(node, mark, path, "{precision: fp32}");
  Pattern pattern;
  for (const auto& [key, value] : entries(node, path)) {
    const std::string key_path = path + "." + key.Scalar();
    const KeySpec& spec = cell_key_spec(key, key_path);
    pattern.emplace_back(spec.key, parse_assignment(spec, value, key, key_path).canonical);
  }
  return pattern;
}

std::vector<Pattern> Loader::parse_excludes(const YAML::Node& node, const YAML::Mark& mark,
                                            std::vector<Where>* at) const {
  std::vector<Pattern> excludes;
  if (!is_list_of_maps(node, mark, "exclude")) return excludes;
  if (node.size() > kMaxExcludes) {
    fail(mark, "exclude",
         "the list has " + std::to_string(node.size()) + " entries; at most " + std::to_string(kMaxExcludes));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    excludes.push_back(
        parse_pattern(node[i], node[i].Mark(), "exclude[" + std::to_string(i) + "]"));
    at->push_back(where(node[i].Mark()));
  }
  return excludes;
}

std::vector<Include> Loader::parse_includes(const YAML::Node& node, const YAML::Mark& mark) const {
  std::vector<Include> includes;
  if (!is_list_of_maps(node, mark, "include")) return includes;
  if (node.size() > kMaxCells) {  // each entry is a cell
    fail(mark, "include",
         "the list has " + std::to_string(node.size()) + " entries; at most " + std::to_string(kMaxCells) +
             " (each is a cell, and an experiment has at most " + std::to_string(kMaxCells) + " cells)");
  }
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node entry = node[i];
    const std::string path = "include[" + std::to_string(i) + "]";
    require_entry_map(entry, entry.Mark(), path, "{batch_size: 512}");
    Include include{{}, Origin{where(entry.Mark()), path, true}};
    for (const auto& [key, value] : entries(entry, path)) {
      const std::string key_path = path + "." + key.Scalar();
      include.assignments.push_back(
          parse_assignment(cell_key_spec(key, key_path), value, key, key_path));
    }
    includes.push_back(std::move(include));
  }
  return includes;
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
  // One byte past the limit is enough to refuse the file; a huge one is never read whole.
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw ConfigError(path, 0, 0, "", "cannot read the file");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) {
    throw ConfigError(path, 0, 0, "",
                      "the file is larger than " + std::to_string(kMaxFileBytes) +
                          " bytes (1 MiB), the limit for experiment files");
  }
  return load_experiment_from_string(text, path, options);
}

ExperimentConfig load_experiment(const std::string& path) {
  return load_experiment(path, LoadOptions{});
}

std::string canonical_value_string(const std::string& key, const std::string& text) {
  const KeySpec* spec = schema::find_spec(key);
  if (!spec) throw std::invalid_argument(unknown_name_message("key", key, schema::cell_keys()));
  try {
    // A plain scalar, as if written in the file; a step list as YAML ("[5, 9]").
    const bool list = spec->type == Type::StepList || spec->type == Type::NameList;
    const YAML::Node node = list ? YAML::Load(text) : YAML::Node(text);
    return schema::canonical(Loader("", LoadOptions{}).parse_value(*spec, node, node.Mark(), key));
  } catch (const ConfigError& e) {
    throw std::invalid_argument("key '" + key + "': " + e.message());
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("key '" + key + "': '" + text + "' is not a YAML list: " + e.msg);
  }
}

}  // namespace mpb
