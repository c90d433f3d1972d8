// The typed configuration of a training run (a cell of the matrix), as the
// trainer, the cell factory and the runner read it. The YAML strings of
// docs/CONFIG.md become these types in one place, the schema
// (config/schema.h), which also turns them back into the canonical strings
// that cell ids, the resolved-configuration JSON and config hashes use.
// Nothing below the loader compares a configuration string.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"     // Activation
#include "core/precision.h"  // PrecisionPolicy
#include "models/model.h"    // ParamRole
#include "models/options.h"  // CheckpointPolicy

namespace mpb {

enum class LossScaleMode { None, Static, Dynamic };
enum class ModelKind { Mlp, Bert };
enum class DataKind { Teacher, Markov, Text };
// data.tokenizer (data.kind text): SentencePiece subwords trained on the corpus, or bytes.
enum class TextTokenizerKind { SentencePiece, Bytes };
enum class OptimizerKind { AdamW, Sgd, Lamb };
// LAMB's trust ratio over a tensor that packs several layers
// (ParamInfo::packed_layers, BERT's QKV): one ratio per layer, as the
// reference model's separate Linears get (split), or one for the whole (packed).
enum class LambQkv { Split, Packed };
enum class LrDecay { None, Linear, Cosine };
// model.pad_vocab: auto pads where it pays, for BERT cells on a CUDA device (train/cell_factory.h).
enum class PadVocab { Off, On, Auto };

struct LossScaleConfig {
  LossScaleMode mode = LossScaleMode::None;
  double value = 65536.0;  // static scale
  double init = 65536.0;   // dynamic: initial scale (2^16, PyTorch GradScaler)
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;  // consecutive finite steps before growing
  double min = 0.0;            // 0: no floor (apex/JMP-style floor when > 0)
  double max = 0.0;            // 0: no cap
  int hysteresis = 1;          // DeepSpeed: non-finite steps tolerated before backing off
};

struct ModelConfig {
  ModelKind kind = ModelKind::Mlp;
  int hidden_layers = 4;
  int width = 1024;
  Activation activation = Activation::Gelu;
  double init_scale = 1.0;
  // BERT: a preset size, any dimension overridden when > 0 (ffn 0: 4 x hidden).
  std::string size = "tiny";  // tiny | mini | small | medium | base | large (bert_preset's names)
  int layers = 0, hidden = 0, heads = 0, ffn = 0;
  int seq_len = 128;
  bool pre_ln = false;     // false: post-LN as in the original BERT
  double dropout = 0.0;    // 0 keeps benchmark cells deterministic
  PadVocab pad_vocab = PadVocab::Auto;  // round the vocabulary up to a multiple of 8 (auto: on a CUDA device)
  MlmHead mlm_head = MlmHead::Sparse;  // BERT: decode only the masked positions (sparse) or every one
  double ln_eps = 1e-12;   // raised where it would vanish in half precision
};

struct DataConfig {
  DataKind kind = DataKind::Teacher;
  int input_dim = 256;
  int classes = 16;
  int teacher_hidden = 64;
  int eval_samples = 4096;
  int vocab = 8192;  // markov: the synthetic corpus's vocabulary; text + sentencepiece: the tokenizer's (both + 4 specials)
  std::string path;  // text: the file to read
  TextTokenizerKind tokenizer = TextTokenizerKind::SentencePiece;  // text only
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW;
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
  LrDecay decay = LrDecay::None;
  // Parameters that get no weight decay (YAML optimizer.decay_exclude: [bias,
  // layernorm]); unset: the model's recipe (effective_decay_exclude).
  std::optional<std::vector<ParamRole>> decay_exclude;
  // LAMB: divide the moments by 1 - beta^t (apex FusedLAMB's bias_correction,
  // on by default as there); AdamW always does, so off is LAMB-only.
  bool bias_correction = true;
  // LAMB: optimizer.lamb_qkv. Split by default: NVIDIA's BERT recipe, which
  // LAMB follows, has separate query, key and value layers.
  LambQkv lamb_qkv = LambQkv::Split;
};

// One fully resolved training run (a cell of the matrix).
struct CellConfig {
  uint64_t seed = 1;
  int steps = 60;
  int warmup_steps = 5;
  int repeats = 1;
  int eval_every = 0;
  int batch_size = 256;
  // The precision as written (fp32 | tf32 | amp_fp16 | amp_bf16 | O0..O3 | a JMP
  // policy string, blanks around ',' and '=' dropped): for ids, JSON and messages.
  // `policy` is what it means, resolved once by the schema (set_precision); the two
  // are only ever set together.
  std::string precision = "fp32";
  PrecisionPolicy policy;  // the default policy is fp32's
  bool fused = false;      // YAML `fusion: off | on`
  // fp8.margin, fp8.amax_history_len, fp8.amax_compute_algo (Transformer
  // Engine's DelayedScaling names): used by precision fp8 only.
  Fp8Recipe fp8;
  LossScaleConfig loss_scale;
  CheckpointPolicy checkpointing = CheckpointPolicy::Off;
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

// optimizer.decay_exclude as the trainer applies it: the file's list, else the
// model's recipe. BERT: biases and LayerNorm gains, as Google's original
// optimization.py, NVIDIA's DeepLearningExamples and HuggingFace's examples
// do; the MLP: nothing excluded (decay on every parameter, as it always had).
inline std::vector<ParamRole> effective_decay_exclude(const CellConfig& c) {
  if (c.optimizer.decay_exclude) return *c.optimizer.decay_exclude;
  if (c.model.kind == ModelKind::Bert) return {ParamRole::Bias, ParamRole::Norm};
  return {};
}

// Where a value was written in the experiment file (1-based line and column)
// and its dotted path there ("matrix.model.width[1]"), for messages about a
// cell after loading (the runner's memory check).
struct ValueOrigin {
  std::string path;
  int line = 0, col = 0;
  bool per_cell = false;  // from the matrix or an include (not the base)
};

// The experiment's `convergence:` key (docs/CONFIG.md): how each cell's
// training is judged against the baseline's (runner/measure/convergence_verdict.h).
// An analysis setting, not a training one: it is not in the cell config or
// its hash, so changing it re-judges finished cells without re-running them.
struct ConvergenceSettings {
  // The equivalence margin delta, fixed before the data are seen (never a
  // function of the observed spread, which would let a noisy baseline widen
  // it): margin_abs in the metric's units when set, else margin (default
  // 0.01 when unset) x |the baseline's mean final metric|. Not both.
  std::optional<double> margin;
  std::optional<double> margin_abs;
  std::string metric = "eval_loss";  // eval_loss | eval_accuracy
  double alpha = 0.05;               // each one-sided test's level
  // Skipped steps beyond the baseline's that still leave a cell stable, as a
  // fraction of the cell's steps over all its seeds. A dynamic loss scale
  // skips a step each time it backs off: about 16 while it calibrates down
  // from 2^16, then about one per growth interval (2,000 steps by default),
  // so 1% leaves room for the calibration in runs of 2,000 steps or more.
  // A shorter run that skips more did lose that share of its updates.
  double max_skipped_fraction = 0.01;
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
  // key -> where the file set the cell's value of it (a whole loss_scale value
  // stands for its loss_scale.* keys); keys left at their defaults are absent.
  std::map<std::string, ValueOrigin> origins;
  ConvergenceSettings convergence;  // the experiment's, the same in every cell
};

struct ExperimentConfig {
  std::string path;  // the YAML file
  std::string name;
  std::string device = "auto";  // auto | cpu | cuda (make_device's names)
  CellConfig base;
  std::vector<Cell> cells;  // expanded matrix (+ include), excludes applied, baseline marked
  ConvergenceSettings convergence;
};

}  // namespace mpb
