// The schema's other half (config/schema.h): a value's text -> its typed,
// validated value, and the checks that involve more than one key. The
// messages here are what a ConfigError says after "key '...': ".

#include <algorithm>
#include <charconv>
#include <climits>

#include "config/config_errors.h"
#include "config/schema.h"
#include "core/precision.h"
#include "core/strings.h"

namespace mpb {
namespace schema {
namespace {

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

[[noreturn]] void fail(const std::string& message) { throw ValueError(message); }

void check_bounds(const KeySpec& spec, double value) {
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
  fail("must be " + range + ", got " + format_number(value));
}

uint64_t parse_seed(const std::string& text) {
  if (!is_decimal_integer(text) || text[0] == '-') {
    fail("expected a non-negative integer, got '" + text + "'");
  }
  uint64_t value = 0;
  const auto result = std::from_chars(skip_plus(text), text.c_str() + text.size(), value);
  if (result.ec != std::errc()) fail("integer out of range: '" + text + "'");
  return value;
}

double parse_number(const KeySpec& spec, const std::string& text) {
  if (!is_decimal_number(text)) fail("expected a number, got '" + text + "'");
  double value = 0;
  const auto result = std::from_chars(skip_plus(text), text.c_str() + text.size(), value);
  if (result.ec != std::errc()) fail("number out of range: '" + text + "'");
  check_bounds(spec, value);
  return value;
}

std::string parse_choice(const KeySpec& spec, const std::string& text) {
  if (contains(spec.choices, text)) return text;
  for (const auto& [alias, choice] : spec.aliases) {
    if (text == alias) return choice;
  }
  std::string message = "expected " + expected_form(spec) + ", got '" + text + "'";
  if (const auto suggestion = nearest_name(text, spec.choices)) {
    message += "; did you mean '" + *suggestion + "'?";
  }
  fail(message);
}

// ===========================================================================
// Precision values: core/precision's resolve_policy decides which are valid,
// and this is the one place it is called for a configuration: each value the
// file writes is resolved once, and cells carry the result.
// ===========================================================================

// The canonical spelling drops blanks around ',' and '=' (so that "p = f32, c = f16"
// and "p=f32,c=f16" are one cell id); whether the value means anything is up to
// resolve_policy, which is given the canonical string. An empty part (",," or a
// trailing ',') is rejected here: dropping it would give one policy two spellings.
Precision parse_precision(const std::string& text) {
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
    fail("precision policy '" + text + "' has an empty part (a stray ',')");
  }
  try {
    return Precision{value, resolve_policy(value)};
  } catch (const std::invalid_argument& e) {
    std::string message = e.what();
    if (message.find("did you mean") == std::string::npos && value.find('=') == std::string::npos) {
      // Candidates for "did you mean": core/precision's one list of names,
      // each offered only if resolve_policy accepts it.
      std::vector<std::string> valid;
      for (const auto& name : named_precisions()) {
        try {
          resolve_policy(name);
          valid.push_back(name);
        } catch (const std::invalid_argument&) {
        }
      }
      const auto suggestion = nearest_name(value, valid);
      if (suggestion && *suggestion != value) message += "; did you mean '" + *suggestion + "'?";
    }
    fail(message);
  }
}

// The scalar forms of a loss scale: a mode, or a number (a static scale). A value
// replaces the whole loss scale: fields it does not give take their defaults.
LossScaleConfig parse_loss_scale(const KeySpec& spec, const std::string& text) {
  CellConfig holder;  // written through the table's accessors
  const KeySpec& mode = *find_spec("loss_scale.mode");
  if (contains(mode.choices, text)) {
    mode.set(holder, text);
  } else if (is_decimal_number(text)) {
    mode.set(holder, std::string("static"));
    holder.loss_scale.value = parse_number(*find_spec("loss_scale.value"), text);
  } else {
    std::string message = "expected " + expected_form(spec) + ", got '" + text + "'";
    if (const auto suggestion = nearest_name(text, mode.choices)) {
      message += "; did you mean '" + *suggestion + "'?";
    }
    fail(message);
  }
  return holder.loss_scale;
}

}  // namespace

std::string expected_form(const KeySpec& spec) {
  switch (spec.type) {
    case Type::Int:
    case Type::StepList:  // its items
      return "an integer";
    case Type::Seed:
      return "a non-negative integer";
    case Type::Number:
      return "a number";
    case Type::Choice:
      return "one of " + join(spec.choices, ", ");
    case Type::NameList:  // its items
      return "one of " + join(spec.choices, ", ");
    case Type::Precision:
      return "a precision";
    case Type::LossScale:
      return "none, static, dynamic, a number (static scale) or a map";
    case Type::Text:
      return "a string";
  }
  return "a value";
}

int parse_int(const KeySpec& spec, const std::string& text) {
  if (!is_decimal_integer(text)) fail("expected an integer, got '" + text + "'");
  long long value = 0;
  const auto result = std::from_chars(skip_plus(text), text.c_str() + text.size(), value);
  if (result.ec != std::errc() || value < INT_MIN || value > INT_MAX) {
    fail("integer out of range: '" + text + "'");
  }
  check_bounds(spec, static_cast<double>(value));
  return static_cast<int>(value);
}

Value parse_scalar(const KeySpec& spec, const std::string& text) {
  switch (spec.type) {
    case Type::Int:
      return parse_int(spec, text);
    case Type::Seed:
      return parse_seed(text);
    case Type::Number:
      return parse_number(spec, text);
    case Type::Choice:
    case Type::NameList:  // one item
      return parse_choice(spec, text);
    case Type::Precision:
      return parse_precision(text);
    case Type::LossScale:
      return parse_loss_scale(spec, text);
    case Type::Text:
      if (text.empty()) fail("expected a non-empty string");
      return text;
    case Type::StepList:
      break;
  }
  throw std::logic_error("schema: " + spec.key + " has no scalar form");
}

}  // namespace schema

void set_precision(CellConfig& config, const std::string& text) {
  const schema::KeySpec& spec = *schema::find_spec("precision");
  spec.set(config, schema::parse_scalar(spec, text));
}

// Checks that involve more than one key, or the not-supported-yet table, on the
// resolved configuration of one cell. The loader runs them on every cell it
// keeps (an excluded combination is never checked); the cell factory on every
// configuration it builds.
std::optional<CellProblem> check_cell_config(const CellConfig& c, bool reject_unsupported) {
  using schema::format_number;
  const auto name = [&](const char* key) { return config_value_string(c, key); };
  if (c.warmup_steps >= c.steps) {
    return CellProblem{{"warmup_steps", "steps"},
                       "warmup_steps (" + std::to_string(c.warmup_steps) +
                           ") must be less than steps (" + std::to_string(c.steps) + ")"};
  }
  if (c.batch_size % c.accumulation != 0) {
    return CellProblem{{"accumulation", "batch_size"},
                       "batch_size (" + std::to_string(c.batch_size) +
                           ") is not divisible by accumulation (" + std::to_string(c.accumulation) + ")"};
  }
  for (const int step : c.inject_nonfinite) {
    if (step > c.steps) {
      return CellProblem{{"inject_nonfinite", "steps"},
                         "inject_nonfinite step " + std::to_string(step) + " is beyond steps (" +
                             std::to_string(c.steps) + ")"};
    }
  }
  if (c.loss_scale.max > 0 && c.loss_scale.min > c.loss_scale.max) {
    return CellProblem{{"loss_scale.min", "loss_scale.max"},
                       "loss_scale min (" + format_number(c.loss_scale.min) + ") is above max (" +
                           format_number(c.loss_scale.max) + ")"};
  }
  if (reject_unsupported) {
    for (const std::string& key : schema::not_yet_keys()) {
      if (const auto reason = unsupported_reason(key, config_value_string(c, key))) {
        return CellProblem{{key}, *reason, true};
      }
    }
  }
  // Each model reads its own kind of data.
  const bool token_data = c.data.kind == DataKind::Markov || c.data.kind == DataKind::Text;
  if (c.model.kind == ModelKind::Bert && !token_data) {
    return CellProblem{{"data.kind", "model.kind"},
                       "model.kind bert needs token data: data.kind markov or text (got " +
                           name("data.kind") + ")"};
  }
  if (c.model.kind == ModelKind::Mlp && token_data) {
    return CellProblem{{"data.kind", "model.kind"},
                       "model.kind mlp needs data.kind teacher (got " + name("data.kind") + ")"};
  }
  if (c.optimizer.warmup >= c.steps && c.optimizer.warmup > 0) {
    return CellProblem{{"optimizer.warmup", "steps"},
                       "optimizer.warmup (" + std::to_string(c.optimizer.warmup) +
                           ") must be less than steps (" + std::to_string(c.steps) + ")"};
  }
  if (!c.optimizer.bias_correction && c.optimizer.kind != OptimizerKind::Lamb) {
    return CellProblem{{"optimizer.bias_correction", "optimizer.kind"},
                       "optimizer.bias_correction off applies to LAMB only (AdamW always corrects its moments; "
                       "got optimizer.kind " + name("optimizer.kind") + ")"};
  }
  if (c.optimizer.lamb_qkv == LambQkv::Packed && c.optimizer.kind != OptimizerKind::Lamb) {
    return CellProblem{{"optimizer.lamb_qkv", "optimizer.kind"},
                       "optimizer.lamb_qkv packed applies to LAMB only (its trust ratio per tensor; "
                       "got optimizer.kind " + name("optimizer.kind") + ")"};
  }
  if (c.model.kind == ModelKind::Mlp && c.checkpointing != CheckpointPolicy::Off) {
    return CellProblem{{"checkpointing", "model.kind"},
                       "checkpointing '" + name("checkpointing") +
                           "' is implemented for model.kind bert; the MLP keeps "
                           "every activation (use checkpointing: off)"};
  }
  if (c.data.kind == DataKind::Text && c.data.path.empty()) {
    return CellProblem{{"data.kind", "data.path"}, "data.kind text needs data.path (a text file)"};
  }
  return std::nullopt;
}

}  // namespace mpb
