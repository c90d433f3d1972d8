// The schema table and the canonical strings (config/schema.h). The table
// drives everything else: the loader's base sections, matrix axes and
// include/exclude/baseline entries, canonical value strings (cell ids and
// matching) and cell_config_to_json, so a key added to the table works
// everywhere. Parsing a value's text is in schema_values.cpp.

#include "config/schema.h"

#include <algorithm>
#include <charconv>
#include <type_traits>

#include "config/config_errors.h"

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

namespace schema {

std::vector<std::string> not_yet_keys() {
  std::vector<std::string> out;
  for (const auto& row : not_supported_yet_table()) out.push_back(row.key);
  return out;
}

namespace {

Bounds at_least(double lo) { return {lo, false}; }                          // [lo, inf)
Bounds above(double lo) { return {lo, true}; }                              // (lo, inf)
Bounds closed_open(double lo, double hi) { return {lo, false, hi, true}; }  // [lo, hi)
Bounds open_open(double lo, double hi) { return {lo, true, hi, true}; }     // (lo, hi)
Bounds closed(double lo, double hi) { return {lo, false, hi, false}; }      // [lo, hi]

// Counts that size an allocation before any cell runs are capped here, at load time, so that
// a stray exponent is an error at its key (file:line:col) and not a std::bad_alloc after
// gigabytes and seconds (issue 43: `repeats: 100000000` with --dry-run built a 7 GB run
// plan). Each cap is far beyond a real experiment: a thousand repeats of one cell give an
// interval a thousandth as wide as one; ten million steps are days on any GPU; the step
// times of one repeat are then 80 MB.
constexpr double kMaxRepeats = 1000;
constexpr double kMaxSteps = 1e7;
constexpr double kMaxAmaxHistory = 1e6;  // fp8.amax_history_len: a float per slot and entry

using Aliases = std::vector<std::pair<std::string, std::string>>;

// A field of CellConfig, for const and non-const configs alike.
#define MPB_FIELD(member) [](auto& c) -> auto& { return c.member; }

// get/set for a field whose C++ type is one of Value's alternatives.
template <class F>
KeySpec plain(const char* key, Type type, Bounds bounds, F field) {
  using T = std::decay_t<decltype(field(std::declval<CellConfig&>()))>;
  KeySpec spec{key, type, bounds, {}, {}, {}, {}};
  spec.get = [field](const CellConfig& c) -> Value { return Value(std::in_place_type<T>, field(c)); };
  spec.set = [field](CellConfig& c, const Value& v) { field(c) = std::get<T>(v); };
  return spec;
}

template <class F>
KeySpec integer(const char* key, Bounds bounds, F field) { return plain(key, Type::Int, bounds, field); }
template <class F>
KeySpec number(const char* key, Bounds bounds, F field) { return plain(key, Type::Number, bounds, field); }
template <class F>
KeySpec step_list(const char* key, Bounds items, F field) { return plain(key, Type::StepList, items, field); }
template <class F>
KeySpec special(const char* key, Type type, F field) { return plain(key, type, {}, field); }

// The names of an enum's (or a bool's) values, in the order messages list them.
// These tables are the only place a configuration string meets its type.
template <class E>
using Names = std::vector<std::pair<E, std::string>>;

template <class E, class F>
KeySpec choice(const char* key, Names<E> names, F field, Aliases aliases = {}) {
  KeySpec spec{key, Type::Choice, {}, {}, std::move(aliases), {}, {}};
  for (const auto& n : names) spec.choices.push_back(n.second);
  const std::string name = key;
  spec.get = [names, field, name](const CellConfig& c) -> Value {
    for (const auto& [value, text] : names) {
      if (value == field(c)) return text;
    }
    throw std::logic_error("schema: " + name + " holds a value that has no name");
  };
  spec.set = [names, field, name](CellConfig& c, const Value& v) {
    for (const auto& [value, text] : names) {
      if (text == std::get<std::string>(v)) {
        field(c) = value;
        return;
      }
    }
    throw std::logic_error("schema: '" + std::get<std::string>(v) + "' is not a " + name);
  };
  return spec;
}

KeySpec precision(const char* key) {
  KeySpec spec{key, Type::Precision, {}, {}, {}, {}, {}};
  spec.get = [](const CellConfig& c) -> Value { return Precision{c.precision, c.policy}; };
  spec.set = [](CellConfig& c, const Value& v) {
    c.precision = std::get<Precision>(v).name;
    c.policy = std::get<Precision>(v).policy;
  };
  return spec;
}

// YAML 1.2 booleans (and PyYAML's round-trip of `off`) for off/on keys.
const Aliases kOffOnAliases = {{"false", "off"}, {"False", "off"}, {"FALSE", "off"},
                               {"true", "on"},   {"True", "on"},   {"TRUE", "on"}};
const Aliases kOffAliases = {{"false", "off"}, {"False", "off"}, {"FALSE", "off"}};

const Names<bool> kOffOn = {{false, "off"}, {true, "on"}};

// optimizer.decay_exclude: a list of parameter roles by name. get gives the
// effective list (the model's recipe where the file sets none), so ids,
// matching and the resolved-configuration JSON all show what the trainer does.
KeySpec decay_exclude(const char* key) {
  static const Names<ParamRole> names = {{ParamRole::Bias, "bias"}, {ParamRole::Norm, "layernorm"}};
  KeySpec spec{key, Type::NameList, {}, {}, {}, {}, {}};
  for (const auto& n : names) spec.choices.push_back(n.second);
  spec.get = [](const CellConfig& c) -> Value {
    const std::vector<ParamRole> roles = effective_decay_exclude(c);
    std::vector<std::string> out;
    for (const auto& [role, name] : names)  // in the table's order: one spelling per set
      if (std::find(roles.begin(), roles.end(), role) != roles.end()) out.push_back(name);
    return out;
  };
  spec.set = [](CellConfig& c, const Value& v) {
    std::vector<ParamRole> roles;
    for (const std::string& item : std::get<std::vector<std::string>>(v)) {
      const auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.second == item; });
      if (it == names.end()) throw std::logic_error("schema: '" + item + "' is not an optimizer.decay_exclude name");
      roles.push_back(it->first);
    }
    c.optimizer.decay_exclude = roles;
  };
  return spec;
}

Names<CheckpointPolicy> checkpoint_names() {
  Names<CheckpointPolicy> names;
  for (const auto p : {CheckpointPolicy::Off, CheckpointPolicy::EveryLayer, CheckpointPolicy::EveryK,
                       CheckpointPolicy::Sqrt}) {
    names.emplace_back(p, checkpoint_policy_name(p));
  }
  return names;
}

}  // namespace

// Every per-cell key, in docs/CONFIG.md order. Cross-key rules (warmup_steps <
// steps, accumulation divides batch_size, loss_scale min <= max, inject_nonfinite
// steps <= steps) are per cell, in check_cell_config.
// clang-format off
const std::vector<KeySpec>& keys() {
  using LS = LossScaleMode;
  static const std::vector<KeySpec> table = {
      special("seed",                       Type::Seed,      MPB_FIELD(seed)),
      integer("steps",                      closed(1, kMaxSteps), MPB_FIELD(steps)),
      integer("warmup_steps",               at_least(0),     MPB_FIELD(warmup_steps)),
      integer("repeats",                    closed(1, kMaxRepeats), MPB_FIELD(repeats)),
      integer("eval_every",                 at_least(0),     MPB_FIELD(eval_every)),
      integer("batch_size",                 at_least(1),     MPB_FIELD(batch_size)),
      precision("precision"),
      choice ("fusion", kOffOn,                              MPB_FIELD(fused), kOffOnAliases),
      integer("fp8.margin",                 at_least(0),     MPB_FIELD(fp8.margin)),
      integer("fp8.amax_history_len",       closed(1, kMaxAmaxHistory), MPB_FIELD(fp8.amax_history_len)),
      choice ("fp8.amax_compute_algo", Names<AmaxAlgo>{{AmaxAlgo::Max, "max"}, {AmaxAlgo::MostRecent, "most_recent"}},
                                                             MPB_FIELD(fp8.amax_compute_algo)),
      special("loss_scale",                 Type::LossScale, MPB_FIELD(loss_scale)),
      choice ("loss_scale.mode", Names<LS>{{LS::None, "none"}, {LS::Static, "static"}, {LS::Dynamic, "dynamic"}},
                                                             MPB_FIELD(loss_scale.mode)),
      number ("loss_scale.value",           above(0),        MPB_FIELD(loss_scale.value)),
      number ("loss_scale.init",            above(0),        MPB_FIELD(loss_scale.init)),
      number ("loss_scale.growth_factor",   above(1),        MPB_FIELD(loss_scale.growth_factor)),
      number ("loss_scale.backoff_factor",  open_open(0, 1), MPB_FIELD(loss_scale.backoff_factor)),
      integer("loss_scale.growth_interval", at_least(1),     MPB_FIELD(loss_scale.growth_interval)),
      number ("loss_scale.min",             at_least(0),     MPB_FIELD(loss_scale.min)),
      number ("loss_scale.max",             at_least(0),     MPB_FIELD(loss_scale.max)),
      integer("loss_scale.hysteresis",      at_least(1),     MPB_FIELD(loss_scale.hysteresis)),
      choice ("checkpointing", checkpoint_names(),           MPB_FIELD(checkpointing), kOffAliases),
      integer("checkpoint_k",               at_least(1),     MPB_FIELD(checkpoint_k)),
      integer("accumulation",               at_least(1),     MPB_FIELD(accumulation)),
      number ("loss_weight",                above(0),        MPB_FIELD(loss_weight)),
      integer("numerics_every",             at_least(0),     MPB_FIELD(numerics_every)),
      step_list("inject_nonfinite",         at_least(1),     MPB_FIELD(inject_nonfinite)),
      choice ("model.kind", Names<ModelKind>{{ModelKind::Mlp, "mlp"}, {ModelKind::Bert, "bert"}},
                                                             MPB_FIELD(model.kind)),
      integer("model.hidden_layers",        at_least(1),     MPB_FIELD(model.hidden_layers)),
      integer("model.width",                at_least(1),     MPB_FIELD(model.width)),
      choice ("model.activation", Names<Activation>{{Activation::Gelu, "gelu"}, {Activation::Relu, "relu"}},
                                                             MPB_FIELD(model.activation)),
      number ("model.init_scale",           above(0),        MPB_FIELD(model.init_scale)),
      // bert_preset (models/bert.h) knows what each size is.
      choice ("model.size", Names<std::string>{{"tiny", "tiny"}, {"mini", "mini"}, {"small", "small"},
                                               {"medium", "medium"}, {"base", "base"}, {"large", "large"}},
                                                             MPB_FIELD(model.size)),
      integer("model.layers",               at_least(0),     MPB_FIELD(model.layers)),
      integer("model.hidden",               at_least(0),     MPB_FIELD(model.hidden)),
      integer("model.heads",                at_least(0),     MPB_FIELD(model.heads)),
      integer("model.ffn",                  at_least(0),     MPB_FIELD(model.ffn)),
      // >= 3: MlmData's shortest sequence is [CLS], one token, [SEP].
      integer("model.seq_len",              at_least(3),     MPB_FIELD(model.seq_len)),
      choice ("model.pre_ln", kOffOn,                        MPB_FIELD(model.pre_ln), kOffOnAliases),
      number ("model.dropout",              closed_open(0, 1), MPB_FIELD(model.dropout)),
      choice ("model.pad_vocab", Names<PadVocab>{{PadVocab::Auto, "auto"}, {PadVocab::Off, "off"}, {PadVocab::On, "on"}},
                                                             MPB_FIELD(model.pad_vocab), kOffOnAliases),
      choice ("model.mlm_head", Names<MlmHead>{{MlmHead::Sparse, "sparse"}, {MlmHead::Dense, "dense"}},
                                                             MPB_FIELD(model.mlm_head)),
      number ("model.ln_eps",               above(0),        MPB_FIELD(model.ln_eps)),
      choice ("data.kind", Names<DataKind>{{DataKind::Teacher, "teacher"}, {DataKind::Markov, "markov"},
                                           {DataKind::Text, "text"}},
                                                             MPB_FIELD(data.kind)),
      integer("data.vocab",                 at_least(8),     MPB_FIELD(data.vocab)),
      special("data.path",                  Type::Text,      MPB_FIELD(data.path)),
      choice ("data.tokenizer", Names<TextTokenizerKind>{{TextTokenizerKind::SentencePiece, "sentencepiece"},
                                                         {TextTokenizerKind::Bytes, "bytes"}},
                                                             MPB_FIELD(data.tokenizer)),
      integer("data.input_dim",             at_least(1),     MPB_FIELD(data.input_dim)),
      integer("data.classes",               at_least(2),     MPB_FIELD(data.classes)),
      integer("data.teacher_hidden",        at_least(1),     MPB_FIELD(data.teacher_hidden)),
      integer("data.eval_samples",          at_least(1),     MPB_FIELD(data.eval_samples)),
      choice ("optimizer.kind", Names<OptimizerKind>{{OptimizerKind::AdamW, "adamw"}, {OptimizerKind::Sgd, "sgd"},
                                                     {OptimizerKind::Lamb, "lamb"}},
                                                             MPB_FIELD(optimizer.kind)),
      number ("optimizer.lr",               above(0),        MPB_FIELD(optimizer.lr)),
      number ("optimizer.beta1",            closed_open(0, 1), MPB_FIELD(optimizer.beta1)),
      number ("optimizer.beta2",            closed_open(0, 1), MPB_FIELD(optimizer.beta2)),
      number ("optimizer.eps",              above(0),        MPB_FIELD(optimizer.eps)),
      number ("optimizer.weight_decay",     at_least(0),     MPB_FIELD(optimizer.weight_decay)),
      number ("optimizer.momentum",         closed_open(0, 1), MPB_FIELD(optimizer.momentum)),
      number ("optimizer.grad_clip",        at_least(0),     MPB_FIELD(optimizer.grad_clip)),
      integer("optimizer.warmup",           at_least(0),     MPB_FIELD(optimizer.warmup)),
      choice ("optimizer.decay", Names<LrDecay>{{LrDecay::None, "none"}, {LrDecay::Linear, "linear"},
                                                {LrDecay::Cosine, "cosine"}},
                                                             MPB_FIELD(optimizer.decay)),
      decay_exclude("optimizer.decay_exclude"),
      choice ("optimizer.bias_correction", kOffOn,           MPB_FIELD(optimizer.bias_correction), kOffOnAliases),
      choice ("optimizer.lamb_qkv", Names<LambQkv>{{LambQkv::Split, "split"}, {LambQkv::Packed, "packed"}},
                                                             MPB_FIELD(optimizer.lamb_qkv)),
  };
  return table;
}
// clang-format on
#undef MPB_FIELD

const KeySpec& device_spec() {
  static const KeySpec spec{"device", Type::Choice, {}, {"auto", "cpu", "cuda"}, {}, {}, {}};
  return spec;
}

const std::vector<std::string> kSections = {"model", "data", "optimizer", "fp8"};
const std::vector<std::string> kExperimentKeys = {"name",    "device",  "matrix",     "exclude",
                                                  "include", "baseline", "convergence"};

const KeySpec* find_spec(const std::string& key) {
  for (const auto& spec : keys()) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

std::vector<std::string> cell_keys() {
  std::vector<std::string> out;
  for (const auto& spec : keys()) out.push_back(spec.key);
  return out;
}

std::vector<std::string> keys_with_prefix(const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& spec : keys()) {
    if (starts_with(spec.key, prefix)) out.push_back(spec.key);
  }
  return out;
}

std::vector<std::string> top_level_keys() {
  std::vector<std::string> out = {"name", "device"};
  for (const auto& spec : keys()) {
    if (spec.key.find('.') == std::string::npos) out.push_back(spec.key);
  }
  out.insert(out.end(),
             {"model", "data", "optimizer", "fp8", "matrix", "exclude", "include", "baseline", "convergence"});
  return out;
}

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

// ===========================================================================
// Canonical strings: one spelling per value, so that 1e-3 and 0.001 give the
// same cell id and match each other.
// ===========================================================================

std::string format_number(double v) {
  if (v == 0) v = 0;  // -0 and 0 are the same value; print both as "0"
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  std::string out(buffer, result.ptr);
  const auto e = out.find('e');
  if (e == std::string::npos) return out;
  const std::string mantissa = out.substr(0, e);
  const bool negative = out[e + 1] == '-';
  std::string digits = out.substr(e + 2);  // after the sign to_chars always writes
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
  return mantissa + "e" + (negative ? "-" : "") + digits;
}

namespace {

// The mode, then the fields that differ from LossScaleConfig's defaults in table
// order: "dynamic", "static{value:1024}", "dynamic{init:1024;growth_interval:100}".
// Equal loss-scale configurations give equal strings however they were written.
std::string format_loss_scale(const LossScaleConfig& loss_scale) {
  CellConfig actual;
  const CellConfig defaults;
  actual.loss_scale = loss_scale;
  const std::string mode = config_value_string(actual, "loss_scale.mode");
  std::string fields;
  for (const auto& key : keys_with_prefix("loss_scale.")) {
    if (key == "loss_scale.mode") continue;
    const KeySpec& spec = *find_spec(key);
    const std::string value = canonical(spec.get(actual));
    if (value == canonical(spec.get(defaults))) continue;
    fields += (fields.empty() ? "" : ";") + key.substr(key.find('.') + 1) + ":" + value;
  }
  return fields.empty() ? mode : mode + "{" + fields + "}";
}

}  // namespace

std::string canonical(const Value& value) {
  struct Visitor {
    std::string operator()(int v) const { return std::to_string(v); }
    std::string operator()(uint64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return format_number(v); }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const Precision& v) const { return v.name; }
    std::string operator()(const LossScaleConfig& v) const { return format_loss_scale(v); }
    std::string operator()(const std::vector<int>& v) const {  // "[]", "[5,9]"
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
      return out + "]";
    }
    std::string operator()(const std::vector<std::string>& v) const { return "[" + join(v, ",") + "]"; }
  };
  return std::visit(Visitor{}, value);
}

}  // namespace schema

// ===========================================================================
// Public conversions
// ===========================================================================

std::string config_value_string(const CellConfig& config, const std::string& key) {
  const schema::KeySpec* spec = schema::find_spec(key);
  if (!spec) throw std::invalid_argument(unknown_name_message("key", key, schema::cell_keys()));
  return schema::canonical(spec->get(config));
}

nlohmann::json cell_config_to_json(const CellConfig& config) {
  // Built from the table so that it always has every key of the YAML: "optimizer.lr"
  // goes to /optimizer/lr. loss_scale comes out as the map of its loss_scale.* keys.
  nlohmann::json json = nlohmann::json::object();
  for (const auto& spec : schema::keys()) {
    if (spec.type == schema::Type::LossScale) continue;
    // An empty optimizer.decay_exclude (decay on every parameter, what every
    // cell did before the key existed) is left out, so those configurations
    // keep their config_hash and earlier results still match them; a list
    // that excludes something (BERT's default) is always written.
    if (spec.type == schema::Type::NameList && std::get<std::vector<std::string>>(spec.get(config)).empty()) continue;
    // model.mlm_head only exists for BERT: MLP cells keep the config_hash
    // they had before the key. BERT cells always write it, so results from
    // before it (every position decoded) no longer match a sparse cell.
    if (spec.key == "model.mlm_head" && config.model.kind != ModelKind::Bert) continue;
    // model.pad_vocab means nothing to the MLP, whose cells wrote "off" (the
    // default) before "auto" was: they keep their config_hash.
    if (spec.key == "model.pad_vocab" && config.model.kind != ModelKind::Bert &&
        config.model.pad_vocab == PadVocab::Auto) {
      json["model"]["pad_vocab"] = "off";
      continue;
    }
    // The fp8.* keys only mean something under precision fp8: other cells
    // leave them out and keep the config_hash they had before the keys existed.
    if (spec.key.rfind("fp8.", 0) == 0 && !config.policy.fp8) continue;
    // optimizer.bias_correction means something to LAMB only (check_cell_config
    // rejects it off elsewhere): other cells keep the config_hash they had
    // before the key existed.
    if (spec.key == "optimizer.bias_correction" && config.optimizer.kind != OptimizerKind::Lamb) continue;
    // optimizer.lamb_qkv likewise (LAMB only). LAMB cells always write it:
    // their results from before it (one ratio for the packed QKV) no longer match.
    if (spec.key == "optimizer.lamb_qkv" && config.optimizer.kind != OptimizerKind::Lamb) continue;
    // data.tokenizer means something to data.kind text only: other cells keep
    // the config_hash they had before the key existed.
    if (spec.key == "data.tokenizer" && config.data.kind != DataKind::Text) continue;
    std::string pointer = "/" + spec.key;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    json[nlohmann::json::json_pointer(pointer)] = std::visit(
        [](const auto& v) -> nlohmann::json {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, LossScaleConfig>) {
            return nullptr;  // not reached: skipped above
          } else if constexpr (std::is_same_v<T, schema::Precision>) {
            return v.name;
          } else {
            return v;
          }
        },
        spec.get(config));
  }
  return json;
}

}  // namespace mpb
