// Experiment configuration: the YAML schema of docs/CONFIG.md as C++ structs,
// the loader that validates it, and the matrix expansion into cells.
// Nothing here is numeric: the trainer reads a resolved CellConfig.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpb {

// A configuration error: where it is (file:line:col, 1-based) and which key.
// what() reads "file:line:col: key 'optimizer.lr': expected a number, got 'abc'";
// "file:line:col" shrinks to "file" when line is 0 (no position, e.g. an unreadable
// file), and "key '...': " is left out when key is empty (e.g. a YAML syntax error).
// key is a dotted path into the file: "optimizer.lr", "matrix.precision[2]",
// "include[0].batch_size".
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string file, int line, int col, std::string key, const std::string& message);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int col() const { return col_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }  // what() without file/line/key

 private:
  std::string file_;
  int line_, col_;
  std::string key_;
  std::string message_;
};

struct LossScaleConfig {
  std::string mode = "none";  // none | static | dynamic
  double value = 65536.0;     // static scale
  double init = 65536.0;      // dynamic: initial scale (2^16, PyTorch GradScaler)
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;  // consecutive finite steps before growing
  double min = 0.0;            // 0: no floor (apex/JMP-style floor when > 0)
  double max = 0.0;            // 0: no cap
  int hysteresis = 1;          // DeepSpeed: non-finite steps tolerated before backing off
};

struct ModelConfig {
  std::string kind = "mlp";  // mlp (bert: later)
  int hidden_layers = 4;
  int width = 1024;
  std::string activation = "gelu";  // gelu | relu
  double init_scale = 1.0;
  // BERT: a preset size, any dimension overridden when > 0 (ffn 0: 4 x hidden).
  std::string size = "tiny";  // tiny | mini | small | medium | base | large
  int layers = 0, hidden = 0, heads = 0, ffn = 0;
  int seq_len = 128;
  std::string pre_ln = "off";     // off: post-LN as in the original BERT
  double dropout = 0.0;           // 0 keeps benchmark cells deterministic
  std::string pad_vocab = "off";  // on: round the vocabulary up to a multiple of 8
  double ln_eps = 1e-12;          // raised where it would vanish in half precision
};

struct DataConfig {
  std::string kind = "teacher";
  int input_dim = 256;
  int classes = 16;
  int teacher_hidden = 64;
  int eval_samples = 4096;
  int vocab = 8192;  // markov: the synthetic corpus's vocabulary
  std::string path;  // text: the file to read
};

struct OptimizerConfig {
  std::string kind = "adamw";  // adamw | sgd
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double momentum = 0.9;
  double grad_clip = 0.0;  // 0: off
  // Learning-rate schedule: linear warm-up over warmup steps from 0 to lr,
  // then constant, or decaying to 0 at the last step (linear or cosine).
  int warmup = 0;
  std::string decay = "none";  // none | linear | cosine
};

// One fully resolved training run (a cell of the matrix).
struct CellConfig {
  uint64_t seed = 1;
  int steps = 60;
  int warmup_steps = 5;
  int repeats = 1;
  int eval_every = 0;
  int batch_size = 256;
  // fp32 | tf32 | amp_fp16 | amp_bf16 | O0..O3 | a JMP policy string; blanks around ','
  // and '=' dropped. Valid means resolve_policy (core/precision.h) accepts it.
  std::string precision = "fp32";
  std::string fusion = "off";  // off | on
  LossScaleConfig loss_scale;
  std::string checkpointing = "off";  // off | every_layer | every_k | sqrt
  int checkpoint_k = 2;
  // Multiplies the training loss (and so every gradient), as an auxiliary
  // loss's weight or a mean over very many tokens would; curves report the
  // unweighted loss. Small values make fp16 gradients underflow.
  double loss_weight = 1.0;
  int accumulation = 1;
  // Sample numerics-health statistics (gradient/activation underflow and overflow
  // fractions, log2 magnitude histograms) every k optimizer steps; 0: off.
  int numerics_every = 10;
  // Fault injection: optimizer steps (1-based, each <= steps, sorted, distinct) at
  // which an inf is put into a gradient. Empty: none.
  std::vector<int> inject_nonfinite;
  ModelConfig model;
  DataConfig data;
  OptimizerConfig optimizer;
};

// One cell: the base config with axis values applied.
struct Cell {
  std::string id;    // "precision=fp32,fusion=off" (axis order; stable)
  std::string slug;  // file-safe id
  // key -> canonical value string ("optimizer.lr" -> "0.001" whether written 1e-3 or
  // 0.001), in matrix order (include cells: in the order the include lists them).
  std::vector<std::pair<std::string, std::string>> axes;
  CellConfig config;
  bool is_baseline = false;
};

struct ExperimentConfig {
  std::string path;  // the YAML file
  std::string name;
  std::string device = "auto";  // auto | cpu | cuda
  CellConfig base;
  std::vector<Cell> cells;  // expanded matrix (+ include), excludes applied, baseline marked
};

struct LoadOptions {
  // false: accept values that unsupported_reason() rejects. For tests, and for whoever
  // implements one of those features before removing its row from the table.
  bool reject_unsupported = true;
};

// Loads, validates and expands. Throws ConfigError.
ExperimentConfig load_experiment(const std::string& path);
ExperimentConfig load_experiment(const std::string& path, const LoadOptions& options);
// Same, from YAML text; `path` is only used in messages.
ExperimentConfig load_experiment_from_string(const std::string& yaml_text, const std::string& path);
ExperimentConfig load_experiment_from_string(const std::string& yaml_text, const std::string& path,
                                             const LoadOptions& options);

// Valid values that the trainer cannot run yet (the "not supported yet" table).
// `key` is a dotted scalar key ("precision", "loss_scale.mode", "model.kind"),
// `value` its canonical string. Returns why the value is rejected, or nullopt.
std::optional<std::string> unsupported_reason(const std::string& key, const std::string& value);

// The canonical string of a resolved key's value, as cell ids use it:
// ("optimizer.lr" -> "0.001", "fusion" -> "off", "loss_scale" -> "dynamic{init:1024}",
// "inject_nonfinite" -> "[5,9]" or "[]").
// Throws std::invalid_argument for a key that is not a per-cell key of the schema.
std::string config_value_string(const CellConfig& config, const std::string& key);
// Parses `text` as a value of `key` (validated like a YAML value; unsupported_reason is
// not applied) and returns its canonical string ("1e-3" -> "0.001", "false" -> "off",
// for inject_nonfinite "[9, 5]" -> "[5,9]").
// Throws std::invalid_argument for an unknown key or an invalid value.
std::string canonical_value_string(const std::string& key, const std::string& text);

// The value a filter, exclude or baseline compares for `key`: the cell's axis value when
// `key` is one of its axes, else config_value_string(cell.config, key).
std::string cell_value_string(const Cell& cell, const std::string& key);

// The file-safe form of a cell id (docs/CONFIG.md): ',' -> "__", [^A-Za-z0-9_.=-] -> '_'.
std::string cell_slug(const std::string& id);

// --filter: comma-separated `key=value` terms, all must match the cell's axes
// (or, for keys that are not axes, its resolved config). Throws std::invalid_argument
// on a malformed expression.
bool cell_matches_filter(const Cell& cell, const std::string& filter);

// The full resolved configuration as JSON (same key names and nesting as the YAML;
// loss_scale always as the full map, inject_nonfinite as an array of integers).
nlohmann::json cell_config_to_json(const CellConfig& config);
// FNV-1a 64 of the canonical (sorted-key) JSON dump, 16 hex digits.
std::string config_hash(const nlohmann::json& canonical);

}  // namespace mpb
