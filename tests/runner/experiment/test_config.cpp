// Loading and validating experiment files (docs/CONFIG.md): base values, every
// kind of bad input, precision values against core/precision, the "not supported
// yet" table, and the example in docs/CONFIG.md. Matrix expansion is in
// test_matrix.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/schema.h"
#include "core/precision.h"
#include "runner/experiment/config.h"
#include "tests/runner/config_test_helpers.h"

namespace mpb {
namespace {

using namespace config_test;

// What core/precision says about a precision value: "" when resolve_policy accepts
// it, else its message. The loader must agree with it whatever it accepts.
std::string policy_error(const std::string& precision) {
  try {
    resolve_policy(precision);
    return "";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

// ---- ConfigError ------------------------------------------------------------

TEST(ConfigError, WhatNamesFileLineColumnAndKey) {
  const ConfigError e("experiments/x.yaml", 12, 5, "optimizer.lr", "expected a number, got 'abc'");
  EXPECT_STREQ(e.what(),
               "experiments/x.yaml:12:5: key 'optimizer.lr': expected a number, got 'abc'");
  EXPECT_EQ(e.message(), "expected a number, got 'abc'");
}

TEST(ConfigError, WhatLeavesOutWhatIsUnknown) {
  EXPECT_STREQ(ConfigError("a.yaml", 3, 1, "", "YAML syntax error: x").what(),
               "a.yaml:3:1: YAML syntax error: x");
  EXPECT_STREQ(ConfigError("a.yaml", 0, 0, "", "cannot open the file").what(),
               "a.yaml: cannot open the file");
}

TEST(ConfigError, RealErrorReadsLikeTheContract) {
  std::string yaml = "name: x\n";
  for (int i = 0; i < 9; ++i) yaml += "# padding\n";
  yaml += "optimizer:\n  kind: adamw\n  lr: abc\n";  // lr's value: line 13, column 7
  const ConfigError e = error_of(yaml);
  EXPECT_STREQ(e.what(),
               "experiments/x.yaml:13:7: key 'optimizer.lr': expected a number, got 'abc'");
}

// ---- Valid files ------------------------------------------------------------

TEST(LoadExperiment, MinimalFileIsOneBaseCellWithDefaults) {
  const ExperimentConfig e = load("name: quick\n");
  EXPECT_EQ(e.path, kFile);
  EXPECT_EQ(e.name, "quick");
  EXPECT_EQ(e.device, "auto");
  ASSERT_EQ(e.cells.size(), 1u);
  EXPECT_EQ(e.cells[0].id, "base");
  EXPECT_EQ(e.cells[0].slug, "base");
  EXPECT_TRUE(e.cells[0].axes.empty());
  EXPECT_TRUE(e.cells[0].is_baseline);
  const CellConfig
      defaults;  // a named object: GCC 12 -O2 warns falsely on a CellConfig{} temporary
  EXPECT_EQ(cell_config_to_json(e.cells[0].config), cell_config_to_json(defaults));
}

TEST(LoadExperiment, ReadsEveryBaseKey) {
  const ExperimentConfig e = load(R"(
name: quickstart-1.2_b
device: cpu
seed: 7
steps: 60
warmup_steps: 5
repeats: 2
eval_every: 10
batch_size: 256
precision: fp32
fusion: on
loss_scale: none
checkpointing: off
checkpoint_k: 3
accumulation: 4
numerics_every: 25
inject_nonfinite: [3, 10]
model:
  kind: mlp
  hidden_layers: 2
  width: 512
  activation: relu
  init_scale: 0.5
data:
  kind: teacher
  input_dim: 32
  classes: 10
  teacher_hidden: 16
  eval_samples: 100
optimizer:
  kind: sgd
  lr: 1e-2
  beta1: 0.8
  beta2: 0.99
  eps: 1.0e-6
  weight_decay: 0
  momentum: 0.5
  grad_clip: 1.5
)");
  EXPECT_EQ(e.name, "quickstart-1.2_b");
  EXPECT_EQ(e.device, "cpu");
  const CellConfig& c = e.base;
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.steps, 60);
  EXPECT_EQ(c.warmup_steps, 5);
  EXPECT_EQ(c.repeats, 2);
  EXPECT_EQ(c.eval_every, 10);
  EXPECT_EQ(c.batch_size, 256);
  EXPECT_EQ(c.precision, "fp32");
  EXPECT_EQ(c.policy.compute, DType::F32);  // resolved by the loader
  EXPECT_TRUE(c.fused);
  EXPECT_EQ(c.loss_scale.mode, LossScaleMode::None);
  EXPECT_EQ(c.checkpointing, CheckpointPolicy::Off);
  EXPECT_EQ(c.checkpoint_k, 3);
  EXPECT_EQ(c.accumulation, 4);
  EXPECT_EQ(c.numerics_every, 25);
  EXPECT_EQ(c.inject_nonfinite, (std::vector<int>{3, 10}));
  EXPECT_EQ(c.model.hidden_layers, 2);
  EXPECT_EQ(c.model.width, 512);
  EXPECT_EQ(c.model.activation, Activation::Relu);
  EXPECT_DOUBLE_EQ(c.model.init_scale, 0.5);
  EXPECT_EQ(c.data.input_dim, 32);
  EXPECT_EQ(c.data.classes, 10);
  EXPECT_EQ(c.data.teacher_hidden, 16);
  EXPECT_EQ(c.data.eval_samples, 100);
  EXPECT_EQ(c.optimizer.kind, OptimizerKind::Sgd);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.01);
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.99);
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.0);
  EXPECT_DOUBLE_EQ(c.optimizer.momentum, 0.5);
  EXPECT_DOUBLE_EQ(c.optimizer.grad_clip, 1.5);
  ASSERT_EQ(e.cells.size(), 1u);
  EXPECT_EQ(cell_config_to_json(e.cells[0].config), cell_config_to_json(c));
}

TEST(LoadExperiment, FusionAcceptsOffOnAndYamlBooleans) {
  const auto fused = [](const std::string& value) { return load("name: x\nfusion: " + value).base.fused; };
  for (const char* off : {"off", "false"}) EXPECT_FALSE(fused(off)) << off;
  for (const char* on : {"on", "true", "\"on\""}) EXPECT_TRUE(fused(on)) << on;
  expect_errors({
      {"name: x\nfusion: yes\n", 2, 9, "fusion", "expected one of off, on, got 'yes'"},
      {"name: x\nfusion: 1\n", 2, 9, "fusion", "expected one of off, on, got '1'"},
  });
}

TEST(LoadExperiment, EmptySectionsAndMatrixAreAbsent) {
  const ExperimentConfig e = load("name: x\nmodel:\ndata:\noptimizer:\nmatrix:\nexclude:\n");
  ASSERT_EQ(e.cells.size(), 1u);
  EXPECT_EQ(e.cells[0].id, "base");
}

TEST(LoadExperiment, NumbersInAnyDecimalSpelling) {
  EXPECT_DOUBLE_EQ(load("name: x\noptimizer: {lr: 1e-3}\n").base.optimizer.lr, 0.001);
  EXPECT_DOUBLE_EQ(load("name: x\noptimizer: {lr: .5}\n").base.optimizer.lr, 0.5);
  EXPECT_DOUBLE_EQ(load("name: x\noptimizer: {lr: +2.}\n").base.optimizer.lr, 2.0);
  EXPECT_DOUBLE_EQ(load("name: x\noptimizer: {lr: 3E+1}\n").base.optimizer.lr, 30.0);
  EXPECT_EQ(load("name: x\nseed: 18446744073709551615\n").base.seed, 18446744073709551615ull);
}

TEST(LoadExperiment, FromFile) {
  const std::string path = ::testing::TempDir() + "mpb_test_config.yaml";
  {
    std::ofstream out(path);
    out << "name: from_file\nsteps: 10\n";
  }
  const ExperimentConfig e = load_experiment(path);
  EXPECT_EQ(e.path, path);
  EXPECT_EQ(e.name, "from_file");
  EXPECT_EQ(e.base.steps, 10);
  std::remove(path.c_str());
}

TEST(LoadExperiment, MissingFile) {
  try {
    load_experiment("/nonexistent/dir/x.yaml");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "/nonexistent/dir/x.yaml");
    EXPECT_EQ(e.line(), 0);
    EXPECT_STREQ(e.what(), "/nonexistent/dir/x.yaml: cannot open the file");
  }
}

// ---- Bad input: structure -----------------------------------------------------

TEST(ConfigErrors, YamlSyntaxError) {
  const ConfigError e = error_of("name: x\nmatrix:\n  fusion: [off, on\nsteps: 3\n");
  EXPECT_EQ(e.key(), "");
  EXPECT_GE(e.line(), 3);
  EXPECT_GE(e.col(), 1);
  EXPECT_NE(e.message().find("YAML syntax error"), std::string::npos) << e.what();
  EXPECT_EQ(std::string(e.what()).rfind("experiments/x.yaml:", 0), 0u) << e.what();

  expect_error("name: x\nsteps: 3\n  seed: 2\n", 3, 7, "", "YAML syntax error: illegal map value");
}

// yaml-cpp 0.7's LoadAll never returns on these (issue 1040; runner/io/yaml_documents.h):
// the fuzzer's first finding. Each must be a syntax error at the comma, at once (the
// first is a stray comma that yaml-cpp reports by itself).
TEST(ConfigErrors, StrayCommaIsASyntaxErrorNotAHang) {
  expect_errors({
      {"name: x\nsteps: 3\n,\n", 3, 1, "", "YAML syntax error: end of map not found"},  // no hang here
      {"- a\n,\n", 2, 1, "", "YAML syntax error: unexpected ','"},
      {",", 1, 1, "", "YAML syntax error: unexpected ','"},
  });
}

TEST(ConfigErrors, EmptyFileOrNotAMap) {
  expect_errors({
      {"", 1, 1, "", "the file is empty"},
      {"# only a comment\n", 1, 1, "", "the file is empty"},
      {"- name: x\n", 1, 1, "", "expected a map at the top level, got a list"},
      {"name: a\n---\nname: b\n", 3, 1, "", "expected one YAML document, found 2"},
  });
}

TEST(ConfigErrors, MissingName) {
  expect_error("steps: 3\n", 1, 1, "name", "missing required key 'name'");
}

TEST(ConfigErrors, InvalidName) {
  expect_errors({
      {"name: my run\n", 1, 7, "name", "invalid name 'my run'"},
      {"name: a/b\n", 1, 7, "name", "invalid name 'a/b'"},
      {"name: ..\n", 1, 7, "name", "invalid name '..'"},
      {"name: \"\"\n", 1, 7, "name", "invalid name ''"},
      {"name: [a]\n", 1, 7, "name", "expected a name, got a list"},
      // It names a directory: bounded (issue 13, D6).
      {"name: " + std::string(300, 'a') + "\n", 1, 7, "name", "the name has 300 characters; at most 100"},
      {"name: " + std::string(101, 'a') + "\n", 1, 7, "name", "the name has 101 characters"},
  });
  EXPECT_EQ(load("name: " + std::string(100, 'a') + "\n").name, std::string(100, 'a'));
}

TEST(ConfigErrors, FileLargerThanOneMebibyte) {
  // A comment line is valid YAML; only the size is wrong.
  std::string yaml = "name: x\n";
  while (yaml.size() <= (size_t{1} << 20)) yaml += "# " + std::string(77, '.') + "\n";
  const ConfigError e = error_of(yaml);
  EXPECT_EQ(e.line(), 0) << e.what();
  EXPECT_NE(e.message().find("limited to 1048576 bytes (1 MiB)"), std::string::npos) << e.what();

  const std::string path = ::testing::TempDir() + "mpb_big_config.yaml";
  std::ofstream(path) << yaml;
  try {
    load_experiment(path);
    ADD_FAILURE() << "a file over 1 MiB loaded";
  } catch (const ConfigError& file_error) {
    EXPECT_NE(std::string(file_error.what()).find("larger than 1048576 bytes"), std::string::npos)
        << file_error.what();
  }
  std::remove(path.c_str());
}

TEST(ConfigErrors, DuplicateKey) {
  expect_errors({
      {"name: x\nsteps: 3\nsteps: 4\n", 3, 1, "steps", "duplicate key (first given at line 2)"},
      {"name: x\nmodel:\n  width: 3\n  width: 4\n", 4, 3, "model.width", "duplicate key"},
  });
}

// ---- Bad input: unknown keys ---------------------------------------------------

TEST(ConfigErrors, UnknownTopLevelKeySuggestsNearest) {
  const ConfigError e = error_of("name: x\noptimiser:\n  lr: 0.1\n");
  expect_points_at(e, 2, 1, "optimiser");
  EXPECT_EQ(e.message(), "unknown key 'optimiser'; did you mean 'optimizer'?");
  expect_error("name: x\nwarmup: 3\n", 2, 1, "warmup", "did you mean 'warmup_steps'?");
}

TEST(ConfigErrors, UnknownKeyFarFromAllListsValidKeys) {
  expect_error("name: x\nzzzzzzzz: 3\n", 2, 1, "zzzzzzzz",
               "unknown key 'zzzzzzzz' (valid: name, device, seed");
}

TEST(ConfigErrors, UnknownKeyInSections) {
  expect_errors({
      {"name: x\nmodel:\n  widht: 3\n", 3, 3, "model.widht",
       "unknown key 'model.widht'; did you mean 'model.width'?"},
      {"name: x\ndata:\n  clases: 3\n", 3, 3, "data.clases", "did you mean 'data.classes'?"},
      {"name: x\noptimizer: {kind: adamw, weightdecay: 0.1}\n", 2, 26, "optimizer.weightdecay",
       "did you mean 'optimizer.weight_decay'?"},
      {"name: x\nloss_scale: {mode: dynamic, grwth_factor: 2}\n", 2, 29, "loss_scale.grwth_factor",
       "did you mean 'loss_scale.growth_factor'?"},
  });
}

TEST(ConfigErrors, DottedKeyInTheBase) {
  expect_error("name: x\noptimizer.lr: 0.1\n", 2, 1, "optimizer.lr",
               "write 'lr' under 'optimizer:'");
}

TEST(ConfigErrors, UnknownMatrixAxis) {
  expect_errors({
      {"name: x\nmatrix:\n  model.widht: [1, 2]\n", 3, 3, "matrix.model.widht",
       "unknown key 'model.widht'; did you mean 'model.width'?"},
      {"name: x\nmatrix:\n  width: [1, 2]\n", 3, 3, "matrix.width", "did you mean 'model.width'?"},
      {"name: x\nmatrix:\n  precison: [fp32]\n", 3, 3, "matrix.precison",
       "did you mean 'precision'?"},
      {"name: x\nmatrix:\n  optimizer: [{lr: 1}]\n", 3, 3, "matrix.optimizer",
       "'optimizer' is a section; name one of its keys"},
      {"name: x\nmatrix:\n  device: [cpu, cuda]\n", 3, 3, "matrix.device",
       "applies to the whole experiment"},
  });
}

// ---- Bad input: types ------------------------------------------------------------

TEST(ConfigErrors, WrongTypes) {
  expect_errors({
      {"name: x\nsteps: many\n", 2, 8, "steps", "expected an integer, got 'many'"},
      {"name: x\nsteps: 1.5\n", 2, 8, "steps", "expected an integer, got '1.5'"},
      {"name: x\nsteps: 1e3\n", 2, 8, "steps", "expected an integer, got '1e3'"},
      {"name: x\nsteps: {a: 1}\n", 2, 8, "steps", "expected an integer, got a map"},
      {"name: x\nsteps: [1]\n", 2, 8, "steps", "expected an integer, got a list"},
      {"name: x\nsteps: 99999999999\n", 2, 8, "steps", "integer out of range"},
      {"name: x\nseed: -1\n", 2, 7, "seed", "expected a non-negative integer, got '-1'"},
      {"name: x\noptimizer:\n  lr: abc\n", 3, 7, "optimizer.lr", "expected a number, got 'abc'"},
      {"name: x\noptimizer:\n  lr: .inf\n", 3, 7, "optimizer.lr", "expected a number, got '.inf'"},
      {"name: x\noptimizer:\n  lr: 0x10\n", 3, 7, "optimizer.lr", "expected a number"},
      {"name: x\noptimizer:\n  lr: 1e999\n", 3, 7, "optimizer.lr", "number out of range"},
      {"name: x\noptimizer:\n  lr: {x: 1}\n", 3, 7, "optimizer.lr", "expected a number, got a map"},
      {"name: x\nmodel:\n  activation: [gelu]\n", 3, 15, "model.activation",
       "expected one of gelu, relu, got a list"},
      {"name: x\nmodel: 3\n", 2, 8, "model", "expected a map, got '3'"},
      {"name: x\ndevice: gpu\n", 2, 9, "device", "expected one of auto, cpu, cuda, got 'gpu'"},
  });
}

TEST(ConfigErrors, EmptyValuePointsAtItsKey) {
  expect_error("name: x\nsteps:\nseed: 1\n", 2, 1, "steps",
               "expected an integer, got an empty value");
}

TEST(LoadExperiment, Fp8RecipeKeys) {
  const CellConfig c = load("name: x\nprecision: fp8\nfp8: {margin: 2, amax_history_len: 16, "
                            "amax_compute_algo: most_recent}\n")
                           .cells.at(0)
                           .config;
  EXPECT_TRUE(c.policy.fp8);
  EXPECT_EQ(c.fp8.margin, 2);
  EXPECT_EQ(c.fp8.amax_history_len, 16);
  EXPECT_EQ(c.fp8.amax_compute_algo, AmaxAlgo::MostRecent);
  // Only fp8 cells write the keys into their configuration (and hash).
  EXPECT_EQ(cell_config_to_json(c)["fp8"]["margin"], 2);
  const CellConfig bf16 = load("name: x\nprecision: amp_bf16\n").cells.at(0).config;
  EXPECT_FALSE(cell_config_to_json(bf16).contains("fp8"));
  expect_error("name: x\nfp8:\n  amax_compute_algo: maximum\n", 3, 22, "fp8.amax_compute_algo",
               "expected one of max, most_recent, got 'maximum'");
}

TEST(ConfigErrors, UnknownChoiceSuggestsNearest) {
  expect_error("name: x\nmodel:\n  activation: gleu\n", 3, 15, "model.activation",
               "expected one of gelu, relu, got 'gleu'; did you mean 'gelu'?");
}

// ---- Bad input: out of range ----------------------------------------------------

struct RangeCase {
  std::string yaml;  // appended to "name: x\n"
  std::string key;
  std::string message;
};

TEST(ConfigErrors, OutOfRange) {
  const RangeCase cases[] = {
      {"steps: 0", "steps", "must be in [1, 1e7], got 0"},
      // Counts that size an allocation before any cell runs (issue 43 item 3).
      {"steps: 10000001", "steps", "must be in [1, 1e7], got 10000001"},
      {"repeats: 100000000", "repeats", "must be in [1, 1000], got 1e8"},
      {"fp8: {amax_history_len: 1000001}", "fp8.amax_history_len", "must be in [1, 1e6], got 1000001"},
      {"warmup_steps: -1", "warmup_steps", "must be >= 0, got -1"},
      {"repeats: 0", "repeats", "must be in [1, 1000], got 0"},
      {"eval_every: -1", "eval_every", "must be >= 0, got -1"},
      {"batch_size: 0", "batch_size", "must be >= 1, got 0"},
      {"accumulation: 0", "accumulation", "must be >= 1, got 0"},
      {"checkpoint_k: 0", "checkpoint_k", "must be >= 1, got 0"},
      {"numerics_every: -1", "numerics_every", "must be >= 0, got -1"},
      {"inject_nonfinite: [0]", "inject_nonfinite[0]", "must be >= 1, got 0"},
      {"model: {hidden_layers: 0}", "model.hidden_layers", "must be >= 1, got 0"},
      {"model: {width: 0}", "model.width", "must be >= 1, got 0"},
      {"model: {init_scale: 0}", "model.init_scale", "must be > 0, got 0"},
      {"data: {input_dim: 0}", "data.input_dim", "must be >= 1, got 0"},
      {"data: {classes: 1}", "data.classes", "must be >= 2, got 1"},
      {"data: {teacher_hidden: 0}", "data.teacher_hidden", "must be >= 1, got 0"},
      {"data: {eval_samples: 0}", "data.eval_samples", "must be >= 1, got 0"},
      {"optimizer: {lr: 0}", "optimizer.lr", "must be > 0, got 0"},
      {"optimizer: {lr: -1e-3}", "optimizer.lr", "must be > 0, got -0.001"},
      {"optimizer: {beta1: 1}", "optimizer.beta1", "must be in [0, 1), got 1"},
      {"optimizer: {beta2: -0.1}", "optimizer.beta2", "must be in [0, 1), got -0.1"},
      {"optimizer: {eps: 0}", "optimizer.eps", "must be > 0, got 0"},
      {"optimizer: {weight_decay: -0.5}", "optimizer.weight_decay", "must be >= 0, got -0.5"},
      {"optimizer: {momentum: 1.0}", "optimizer.momentum", "must be in [0, 1), got 1"},
      {"optimizer: {grad_clip: -1}", "optimizer.grad_clip", "must be >= 0, got -1"},
      {"loss_scale: 0", "loss_scale", "must be > 0, got 0"},
      {"loss_scale: -8", "loss_scale", "must be > 0, got -8"},
      {"loss_scale: {mode: static, value: 0}", "loss_scale.value", "must be > 0, got 0"},
      {"loss_scale: {mode: dynamic, init: 0}", "loss_scale.init", "must be > 0, got 0"},
      {"loss_scale: {mode: dynamic, min: -1}", "loss_scale.min", "must be >= 0, got -1"},
      {"loss_scale: {mode: dynamic, max: -1}", "loss_scale.max", "must be >= 0, got -1"},
      {"loss_scale: {mode: dynamic, growth_factor: 1}", "loss_scale.growth_factor",
       "must be > 1, got 1"},
      {"loss_scale: {mode: dynamic, backoff_factor: 1}", "loss_scale.backoff_factor",
       "must be in (0, 1), got 1"},
      {"loss_scale: {mode: dynamic, backoff_factor: 0}", "loss_scale.backoff_factor",
       "must be in (0, 1), got 0"},
      {"loss_scale: {mode: dynamic, growth_interval: 0}", "loss_scale.growth_interval",
       "must be >= 1, got 0"},
      {"loss_scale: {mode: dynamic, hysteresis: 0}", "loss_scale.hysteresis",
       "must be >= 1, got 0"},
      {"fp8: {margin: -1}", "fp8.margin", "must be >= 0, got -1"},
      {"fp8: {amax_history_len: 0}", "fp8.amax_history_len", "must be in [1, 1e6], got 0"},
  };
  for (const auto& c : cases) {
    // Range errors come before the not-supported-yet check, so they are reported
    // either way.
    const ConfigError e = error_of("name: x\n" + c.yaml + "\n");
    EXPECT_EQ(e.line(), 2) << c.yaml;
    EXPECT_EQ(e.key(), c.key) << c.yaml << ": " << e.what();
    EXPECT_EQ(e.message(), c.message) << c.yaml;
  }
}

TEST(ConfigErrors, BoundaryValuesAreAccepted) {
  const CellConfig c = load(R"(name: x
steps: 1
warmup_steps: 0
batch_size: 1
data: {classes: 2}
optimizer: {beta1: 0, beta2: 0.9999, weight_decay: 0, grad_clip: 0, momentum: 0}
)")
                           .base;
  EXPECT_EQ(c.steps, 1);
  EXPECT_EQ(c.warmup_steps, 0);
  EXPECT_EQ(c.data.classes, 2);
}

TEST(ConfigErrors, WarmupMustBeBelowSteps) {
  expect_error("name: x\nsteps: 5\nwarmup_steps: 5\n", 3, 15, "warmup_steps",
               "cell 'base': warmup_steps (5) must be less than steps (5)");
  // The default warmup_steps (5) against a small steps.
  expect_error("name: x\nsteps: 3\n", 2, 8, "steps",
               "warmup_steps (5) must be less than steps (3)");
}

TEST(ConfigErrors, BatchSizeMustBeDivisibleByAccumulation) {
  expect_error("name: x\nbatch_size: 100\naccumulation: 3\n", 3, 15, "accumulation",
               "cell 'base': batch_size (100) is not divisible by accumulation (3)");
  EXPECT_EQ(load("name: x\nbatch_size: 96\naccumulation: 3\n").cells[0].config.accumulation, 3);
}

// ---- Precision values ------------------------------------------------------------
// core/precision's resolve_policy decides which precisions are valid; the loader
// gives a value one spelling and turns a rejection into a ConfigError at the value.

// Loads `precision: "<written>"` and checks it against resolve_policy(canonical):
// accepted -> the base precision is `canonical`; rejected -> a ConfigError at the
// value (line 2, column 12) whose message starts with resolve_policy's.
void expect_precision_like_resolve_policy(const std::string& written,
                                          const std::string& canonical) {
  const std::string yaml = "name: x\nprecision: \"" + written + "\"\n";
  const std::string rejected = policy_error(canonical);
  if (rejected.empty()) {
    EXPECT_EQ(load(yaml).base.precision, canonical) << "written: '" << written << "'";
    return;
  }
  const ConfigError e = error_of(yaml);
  expect_points_at(e, 2, 12, "precision");
  EXPECT_EQ(e.message().rfind(rejected, 0), 0u)
      << "message: " << e.message() << "\nresolve_policy: " << rejected;
}

TEST(Precision, AcceptsExactlyWhatResolvePolicyAccepts) {
  for (const std::string v :
       {"fp32", "tf32", "amp_fp16", "amp_bf16", "O0", "O1", "O2", "O3", "float32", "float16",
        "bfloat16", "f32", "f16", "bf16", "half", "full",
        "params=float32,compute=float16,output=float32", "p=f32,c=bf16,o=f32",
        "params=full,compute=half", "p=f16,c=f16,o=f16", "params=float16", "p=f16,c=bf16",
        "fp33", "float64", "O4", "params=float33", "weights=f16", "params=f16,p=f32", "amp"}) {
    expect_precision_like_resolve_policy(v, v);
  }
}

TEST(Precision, BlanksAroundCommasAndEqualsAreNotPartOfTheValue) {
  expect_precision_like_resolve_policy("  p = f32 , c = f16 ", "p=f32,c=f16");
  expect_precision_like_resolve_policy(" params =float32,compute= bfloat16",
                                       "params=float32,compute=bfloat16");
  expect_precision_like_resolve_policy(" tf32 ", "tf32");
}

TEST(Precision, DocumentedFormsLoad) {
  // The forms docs/CONFIG.md documents; each must resolve (and run: no "not supported
  // yet" for any precision).
  for (const std::string v :
       {"fp32", "tf32", "amp_fp16", "amp_bf16", "O0", "O1", "O2", "O3",
        "params=float32,compute=float16,output=float32", "p=f32,c=bf16,o=bf16",
        "params=full,compute=half", "bfloat16", "half"}) {
    try {
      EXPECT_EQ(load("name: x\nprecision: \"" + v + "\"\n").base.precision, v);
    } catch (const ConfigError& e) {
      ADD_FAILURE() << v << ": " << e.what();
    }
  }
}

TEST(Precision, DidYouMeanOffersFp8) {
  // The hint's candidates are core/precision's one list of names; fp8 was once
  // missing from a second, restated list, so `fp9` was offered fp32.
  for (const std::string typo : {"fp9", "fp_8"}) {
    const ConfigError e = error_of("name: x\nprecision: " + typo + "\n");
    EXPECT_EQ(e.message(), policy_error(typo) + "; did you mean 'fp8'?") << typo;
  }
}

TEST(Precision, RejectionIsAConfigErrorAtTheValue) {
  const ConfigError e = error_of("name: x\nprecision: fp33\n");
  expect_points_at(e, 2, 12, "precision");
  ASSERT_FALSE(policy_error("fp33").empty());
  // resolve_policy's message, plus a suggestion among the names that resolve.
  EXPECT_EQ(e.message(), policy_error("fp33") + "; did you mean 'fp32'?");
  EXPECT_EQ(std::string(e.what()), "experiments/x.yaml:2:12: key 'precision': " + e.message());

  expect_errors({
      {"name: x\nprecision: float64\n", 2, 12, "precision", policy_error("float64")},
      {"name: x\nprecision: \"params=float33\"\n", 2, 12, "precision",
       policy_error("params=float33")},
      {"name: x\nmatrix:\n  precision: [fp32, fp33]\n", 3, 21, "matrix.precision[1]",
       policy_error("fp33")},
      {"name: x\ninclude:\n  - {precision: \"weights=f16\"}\n", 3, 17, "include[0].precision",
       policy_error("weights=f16")},
      {"name: x\nbaseline: {precision: O9}\n", 2, 23, "baseline.precision", policy_error("O9")},
  });
  // Checked where written, even where every cell overrides it.
  expect_error("name: x\nprecision: fp64\nmatrix:\n  precision: [fp32]\n", 2, 12, "precision",
               policy_error("fp64"));
}

TEST(Precision, EmptyPolicyPartsAndNonScalars) {
  expect_errors({
      {"name: x\nprecision: \"c=f16,\"\n", 2, 12, "precision",
       "precision policy 'c=f16,' has an empty part (a stray ',')"},
      {"name: x\nprecision: \"p=f32,,c=f16\"\n", 2, 12, "precision", "has an empty part"},
      {"name: x\nprecision: [fp32]\n", 2, 12, "precision", "expected a precision, got a list"},
      {"name: x\nprecision:\nseed: 1\n", 2, 1, "precision",
       "expected a precision, got an empty value"},
  });
}

// ---- Not supported yet ------------------------------------------------------------

TEST(Unsupported, Table) {
  // Every precision and every loss-scale mode is supported; which precisions are
  // valid is resolve_policy's business.
  for (const char* v : {"fp32", "tf32", "amp_fp16", "amp_bf16", "O1", "O3",
                        "params=float32,compute=float16"}) {
    EXPECT_EQ(unsupported_reason("precision", v), std::nullopt) << v;
  }
  for (const char* mode : {"none", "static", "dynamic"}) {
    EXPECT_EQ(unsupported_reason("loss_scale.mode", mode), std::nullopt) << mode;
  }
  for (const char* mode : {"off", "every_layer", "every_k", "sqrt"}) {
    EXPECT_EQ(unsupported_reason("checkpointing", mode), std::nullopt) << mode;
  }
  EXPECT_EQ(unsupported_reason("model.kind", "mlp"), std::nullopt);
  EXPECT_EQ(unsupported_reason("model.kind", "bert"), std::nullopt);
  EXPECT_EQ(unsupported_reason("optimizer.kind", "adamw"), std::nullopt);
  EXPECT_EQ(unsupported_reason("optimizer.kind", "sgd"), std::nullopt);
  EXPECT_EQ(unsupported_reason("optimizer.kind", "lamb"), std::nullopt);
  // Supported: fusion both ways, any accumulation, fault injection, numerics sampling.
  EXPECT_EQ(unsupported_reason("fusion", "on"), std::nullopt);
  EXPECT_EQ(unsupported_reason("accumulation", "8"), std::nullopt);
  EXPECT_EQ(unsupported_reason("inject_nonfinite", "[5]"), std::nullopt);
  EXPECT_EQ(unsupported_reason("numerics_every", "1"), std::nullopt);
}

TEST(Config, BiasCorrectionOffIsLambOnly) {
  expect_error("name: x\noptimizer:\n  kind: adamw\n  bias_correction: off\n", 4, 20, "optimizer.bias_correction",
               "optimizer.bias_correction off applies to LAMB only");
  const ExperimentConfig e = load("name: x\noptimizer:\n  kind: lamb\n  bias_correction: false\n");
  ASSERT_EQ(e.cells.size(), 1u);
  EXPECT_EQ(e.cells[0].config.optimizer.kind, OptimizerKind::Lamb);
  EXPECT_FALSE(e.cells[0].config.optimizer.bias_correction);
}

// optimizer.lamb_qkv: split by default, packed on request, packed an error
// (naming the key's line and column) with another optimizer; LAMB cells write
// it into their config JSON (and hash), other cells leave it out.
TEST(Config, LambQkvIsSplitByDefaultAndLambOnly) {
  expect_error("name: x\noptimizer:\n  kind: adamw\n  lamb_qkv: packed\n", 4, 13, "optimizer.lamb_qkv",
               "optimizer.lamb_qkv packed applies to LAMB only");
  expect_error("name: x\noptimizer:\n  kind: lamb\n  lamb_qkv: pakced\n", 4, 13, "optimizer.lamb_qkv", "packed");
  const ExperimentConfig split = load("name: x\noptimizer:\n  kind: lamb\n");
  ASSERT_EQ(split.cells.size(), 1u);
  EXPECT_EQ(split.cells[0].config.optimizer.lamb_qkv, LambQkv::Split);
  EXPECT_EQ(cell_config_to_json(split.cells[0].config)["optimizer"]["lamb_qkv"], "split");
  const ExperimentConfig packed = load("name: x\noptimizer:\n  kind: lamb\n  lamb_qkv: packed\n");
  EXPECT_EQ(packed.cells[0].config.optimizer.lamb_qkv, LambQkv::Packed);
  EXPECT_NE(config_hash(cell_config_to_json(split.cells[0].config)),
            config_hash(cell_config_to_json(packed.cells[0].config)));
  const ExperimentConfig adamw = load("name: x\noptimizer:\n  kind: adamw\n");
  EXPECT_FALSE(cell_config_to_json(adamw.cells[0].config)["optimizer"].contains("lamb_qkv"));
}

TEST(Unsupported, SupportedValuesLoad) {
  const ExperimentConfig e = load(R"(name: x
batch_size: 64
matrix:
  fusion: [off, on]
  accumulation: [1, 4]
  optimizer.kind: [adamw, sgd, lamb]
)");
  EXPECT_EQ(e.cells.size(), 12u);
}

TEST(Unsupported, EveryLossScaleModeLoads) {
  const std::vector<std::pair<const char*, LossScaleMode>> modes = {
      {"none", LossScaleMode::None},
      {"static", LossScaleMode::Static},
      {"dynamic", LossScaleMode::Dynamic},
      {"1024", LossScaleMode::Static}};
  for (const auto& [text, mode] : modes)
    EXPECT_EQ(load(std::string("name: x\nloss_scale: ") + text).base.loss_scale.mode, mode) << text;
  EXPECT_EQ(load("name: x\nloss_scale:\n  mode: dynamic\n  init: 1024\n").base.loss_scale.init,
            1024.0);
  EXPECT_EQ(load("name: x\nmatrix:\n  loss_scale: [none, static, dynamic]\n").cells.size(), 3u);
}

TEST(Unsupported, OptionTurnsTheTableOff) {
  const ExperimentConfig e =
      load("name: x\noptimizer: {kind: lamb}\n", allow_unsupported());
  EXPECT_EQ(e.base.optimizer.kind, OptimizerKind::Lamb);
}

TEST(Unsupported, BaseValueEveryCellOverridesIsNotRun) {
  // Only values that a cell runs are checked.
  const ExperimentConfig e =
      load("name: x\noptimizer: {kind: lamb}\nmatrix:\n  optimizer.kind: [adamw]\n");
  ASSERT_EQ(e.cells.size(), 1u);
  EXPECT_EQ(e.cells[0].config.optimizer.kind, OptimizerKind::AdamW);
}

// ---- loss_scale values ---------------------------------------------------------------

TEST(LossScale, Forms) {
  EXPECT_EQ(load("name: x\nloss_scale: static\n").base.loss_scale.mode, LossScaleMode::Static);
  const LossScaleConfig number = load("name: x\nloss_scale: 1024\n").base.loss_scale;
  EXPECT_EQ(number.mode, LossScaleMode::Static);
  EXPECT_DOUBLE_EQ(number.value, 1024.0);
  const LossScaleConfig map = load(R"(name: x
loss_scale: {mode: dynamic, init: 65536, growth_factor: 2, backoff_factor: 0.5,
             growth_interval: 2000, min: 1, max: 16777216, hysteresis: 3}
)")
                                  .base.loss_scale;
  EXPECT_EQ(map.mode, LossScaleMode::Dynamic);
  EXPECT_DOUBLE_EQ(map.min, 1.0);
  EXPECT_DOUBLE_EQ(map.max, 16777216.0);
  EXPECT_EQ(map.hysteresis, 3);
  const LossScaleConfig fixed =
      load("name: x\nloss_scale: {mode: static, value: 8}\n").base.loss_scale;
  EXPECT_DOUBLE_EQ(fixed.value, 8.0);
}

TEST(LossScale, BadForms) {
  expect_errors({
      {"name: x\nloss_scale: dynamc\n", 2, 13, "loss_scale",
       "expected none, static, dynamic, a number (static scale) or a map, got 'dynamc'; did "
      "you mean 'dynamic'?"},
      {"name: x\nloss_scale: {init: 8}\n", 2, 13, "loss_scale", "needs 'mode'"},
      {"name: x\nloss_scale: {mode: static, init: 8}\n", 2, 28, "loss_scale.init",
       "'init' applies to mode dynamic, not static"},
      {"name: x\nloss_scale: {mode: dynamic, value: 8}\n", 2, 29, "loss_scale.value",
       "'value' applies to mode static, not dynamic"},
      {"name: x\nloss_scale: {mode: dynamic, min: 8, max: 4}\n", 2, 13, "loss_scale",
       "loss_scale min (8) is above max (4)"},
  });
}

// ---- numerics_every -------------------------------------------------------------------

TEST(NumericsEvery, DefaultOffAndEveryK) {
  EXPECT_EQ(load("name: x\n").base.numerics_every, 10);
  EXPECT_EQ(load("name: x\nnumerics_every: 0\n").base.numerics_every, 0);  // off
  EXPECT_EQ(load("name: x\nnumerics_every: 1\n").base.numerics_every, 1);
  EXPECT_EQ(load("name: x\nnumerics_every: +250\n").base.numerics_every, 250);
  const CellConfig defaults;
  EXPECT_EQ(cell_config_to_json(defaults)["numerics_every"], 10);
  EXPECT_EQ(config_value_string(defaults, "numerics_every"), "10");
}

TEST(NumericsEvery, BadValues) {
  expect_errors({
      {"name: x\nnumerics_every: -1\n", 2, 17, "numerics_every", "must be >= 0, got -1"},
      {"name: x\nnumerics_every: often\n", 2, 17, "numerics_every",
       "expected an integer, got 'often'"},
      {"name: x\nnumerics_every: 2.5\n", 2, 17, "numerics_every", "expected an integer, got '2.5'"},
      {"name: x\nnumerics_every: [10]\n", 2, 17, "numerics_every",
       "expected an integer, got a list"},
      {"name: x\nnumerics_every: 99999999999\n", 2, 17, "numerics_every", "integer out of range"},
      {"name: x\nnumerics_every:\nseed: 1\n", 2, 1, "numerics_every",
       "expected an integer, got an empty value"},
      {"name: x\nnumerics_evry: 5\n", 2, 1, "numerics_evry", "did you mean 'numerics_every'?"},
      {"name: x\nmatrix:\n  numerics_every: [0, -5]\n", 3, 23, "matrix.numerics_every[1]",
       "must be >= 0, got -5"},
  });
}

// ---- inject_nonfinite -------------------------------------------------------------------

TEST(InjectNonfinite, Values) {
  EXPECT_TRUE(load("name: x\n").base.inject_nonfinite.empty());  // default: none
  EXPECT_EQ(load("name: x\ninject_nonfinite: [3, 10]\n").base.inject_nonfinite,
            (std::vector<int>{3, 10}));
  EXPECT_TRUE(load("name: x\ninject_nonfinite: []\n").base.inject_nonfinite.empty());
  // Any order; kept sorted.
  EXPECT_EQ(load("name: x\ninject_nonfinite: [10, 3]\n").base.inject_nonfinite,
            (std::vector<int>{3, 10}));
  EXPECT_EQ(load("name: x\ninject_nonfinite:\n  - 7\n  - +2\n").base.inject_nonfinite,
            (std::vector<int>{2, 7}));
  // Step 1 and the last step are both optimizer steps.
  const ExperimentConfig last = load("name: x\nsteps: 10\ninject_nonfinite: [1, 10]\n");
  EXPECT_EQ(last.cells[0].config.inject_nonfinite, (std::vector<int>{1, 10}));
}

TEST(InjectNonfinite, CanonicalStringAndJsonArray) {
  CellConfig config;
  EXPECT_EQ(config_value_string(config, "inject_nonfinite"), "[]");
  nlohmann::json j = cell_config_to_json(config);
  ASSERT_TRUE(j["inject_nonfinite"].is_array());
  EXPECT_TRUE(j["inject_nonfinite"].empty());
  config.inject_nonfinite = {5, 9};
  EXPECT_EQ(config_value_string(config, "inject_nonfinite"), "[5,9]");
  j = cell_config_to_json(config);
  EXPECT_EQ(j["inject_nonfinite"], nlohmann::json::array({5, 9}));
  EXPECT_TRUE(j["inject_nonfinite"][0].is_number_integer());
  EXPECT_EQ(canonical_value_string("inject_nonfinite", "[9, 5]"), "[5,9]");
  EXPECT_EQ(canonical_value_string("inject_nonfinite", "[]"), "[]");
  for (const char* bad : {"5", "[0]", "[5, 5]", "[5,", "[a]", "{a: 1}", ""}) {
    EXPECT_THROW(canonical_value_string("inject_nonfinite", bad), std::invalid_argument) << bad;
  }
}

TEST(InjectNonfinite, BadValues) {
  const ConfigError e = error_of("name: x\ninject_nonfinite: 5\n");
  EXPECT_STREQ(e.what(),
               "experiments/x.yaml:2:19: key 'inject_nonfinite': expected a list of optimizer "
               "steps such as [3, 10] (or [] for none), got '5'");
  expect_errors({
      {"name: x\ninject_nonfinite: {a: 1}\n", 2, 19, "inject_nonfinite",
       "expected a list of optimizer steps such as [3, 10] (or [] for none), got a map"},
      {"name: x\ninject_nonfinite:\nseed: 1\n", 2, 1, "inject_nonfinite", "got an empty value"},
      {"name: x\ninject_nonfinite: [3, 0]\n", 2, 23, "inject_nonfinite[1]", "must be >= 1, got 0"},
      {"name: x\ninject_nonfinite: [3, -2]\n", 2, 23, "inject_nonfinite[1]",
       "must be >= 1, got -2"},
      {"name: x\ninject_nonfinite: [3, x]\n", 2, 23, "inject_nonfinite[1]",
       "expected an integer, got 'x'"},
      {"name: x\ninject_nonfinite: [1.5]\n", 2, 20, "inject_nonfinite[0]",
       "expected an integer, got '1.5'"},
      {"name: x\ninject_nonfinite: [[3]]\n", 2, 20, "inject_nonfinite[0]",
       "expected an integer, got a list"},
      {"name: x\ninject_nonfinite: [99999999999]\n", 2, 20, "inject_nonfinite[0]",
       "integer out of range"},
      {"name: x\ninject_nonfinite: [3, 10, 3]\n", 2, 27, "inject_nonfinite[2]",
       "step 3 is listed twice (same as inject_nonfinite[0])"},
      {"name: x\ninject_nonfinite:\n  - 4\n  - abc\n", 4, 5, "inject_nonfinite[1]",
       "expected an integer, got 'abc'"},
  });
}

TEST(InjectNonfinite, StepsMustNotExceedSteps) {
  const ConfigError e = error_of("name: x\nsteps: 20\ninject_nonfinite: [5, 21]\n");
  EXPECT_STREQ(e.what(),
               "experiments/x.yaml:3:19: key 'inject_nonfinite': cell 'base': inject_nonfinite "
               "step 21 is beyond steps (20)");
  // Against the default steps (60).
  expect_error("name: x\ninject_nonfinite: [61]\n", 2, 19, "inject_nonfinite",
               "cell 'base': inject_nonfinite step 61 is beyond steps (60)");
}

// ---- docs/CONFIG.md ----------------------------------------------------------------------

// The text of the first ```yaml block of a Markdown file ("" if there is none).
std::string first_yaml_block(const std::string& markdown) {
  const std::string fence = "```yaml\n";
  const auto start = markdown.find(fence);
  if (start == std::string::npos) return "";
  const auto body = start + fence.size();
  const auto end = markdown.find("\n```", body);
  if (end == std::string::npos) return "";
  return markdown.substr(body, end + 1 - body);
}

TEST(Docs, ConfigMdExampleLoadsVerbatim) {
  const std::string path = std::string(MPB_SOURCE_DIR) + "/docs/CONFIG.md";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "cannot open " << path;
  std::stringstream text;
  text << in.rdbuf();
  const std::string yaml = first_yaml_block(text.str());
  ASSERT_FALSE(yaml.empty()) << "no ```yaml block in " << path;
  try {
    // Default options: the example must also be runnable (no "not supported yet").
    const ExperimentConfig e = load_experiment_from_string(yaml, "docs/CONFIG.md");
    EXPECT_EQ(e.name, "quickstart");
    // What the text after the example says it expands to.
    EXPECT_EQ(e.cells.size(), 7u);
    int baselines = 0;
    for (const auto& cell : e.cells) {
      if (cell.is_baseline) {
        ++baselines;
        EXPECT_EQ(cell.id, "precision=fp32,fusion=off,model.width=1024");
      }
    }
    EXPECT_EQ(baselines, 1);
  } catch (const ConfigError& e) {
    FAIL() << "the example in docs/CONFIG.md does not load: " << e.what();
  }
}

}  // namespace
}  // namespace mpb

namespace mpb {
namespace {

TEST(LossWeight, ParsesAndRejectsNonPositive) {
  ExperimentConfig e = load_experiment_from_string("name: w\nloss_weight: 0.001\n", "w.yaml");
  EXPECT_DOUBLE_EQ(e.cells.at(0).config.loss_weight, 0.001);
  try {
    load_experiment_from_string("name: w\nloss_weight: 0\n", "w.yaml");
    ADD_FAILURE() << "loss_weight 0 accepted";
  } catch (const ConfigError& err) {
    EXPECT_EQ(err.key(), "loss_weight");
    EXPECT_EQ(err.line(), 2);
  }
}

}  // namespace
}  // namespace mpb

namespace mpb {
namespace {

TEST(ModelData, EachModelNeedsItsKindOfData) {
  LoadOptions allow;
  allow.reject_unsupported = false;
  try {
    load_experiment_from_string("name: x\nmodel: {kind: mlp}\ndata: {kind: markov}\n", "x.yaml", allow);
    ADD_FAILURE() << "mlp on token data accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.kind mlp needs data.kind teacher"), std::string::npos) << e.what();
  }
  try {
    load_experiment_from_string("name: x\nmodel: {kind: bert}\ndata: {kind: text}\n", "x.yaml", allow);
    ADD_FAILURE() << "text data without a path accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("needs data.path"), std::string::npos) << e.what();
  }
  allow.check_files = false;  // a.txt is a name here
  const ExperimentConfig ok = load_experiment_from_string(
      "name: x\nmodel: {kind: bert, size: mini, seq_len: 64, pre_ln: on}\ndata: {kind: text, path: a.txt}\n", "x.yaml",
      allow);
  EXPECT_EQ(ok.base.model.size, "mini");
  EXPECT_TRUE(ok.base.model.pre_ln);
  EXPECT_EQ(ok.base.data.path, "a.txt");
}

// Issue 13, D6: what the models and data sources need fails at load time (and
// so in --dry-run), at the value, instead of when the cell runs.
TEST(ModelData, ModelRulesFailAtTheValue) {
  expect_errors({
      {"name: x\nmodel:\n  kind: bert\n  hidden: 130\n  heads: 4\ndata: {kind: markov}\n", 4, 11, "model.hidden",
       "cell 'base': BERT: hidden 130 is not divisible by heads 4"},
      // hidden from the preset: the message says where it came from.
      {"name: x\nmodel:\n  kind: bert\n  size: base\n  heads: 5\ndata: {kind: markov}\n", 5, 10, "model.heads",
       "BERT: hidden 768 is not divisible by heads 5 (each head gets hidden / heads dimensions) "
       "(model.size base gives hidden 768)"},
      // Only the cell that breaks the rule, at its axis value.
      {"name: x\nmodel: {kind: bert}\ndata: {kind: markov}\nmatrix:\n  model.heads: [2, 3]\n", 5, 20,
       "matrix.model.heads[1]", "cell 'model.heads=3': BERT: hidden 128 is not divisible by heads 3"},
      // MlmData needs [CLS], a token and [SEP].
      {"name: x\nmodel:\n  kind: bert\n  seq_len: 2\ndata: {kind: markov}\n", 4, 12, "model.seq_len",
       "must be >= 3, got 2"},
  });
}

// A text file for the tests below: `bytes` bytes in the test's temporary directory.
std::string text_file(const std::string& name, size_t bytes) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << std::string(bytes, 'a');
  return path;
}

TEST(ModelData, TextDataFileMustExistAndBeLongEnough) {
  const std::string dir = ::testing::TempDir();
  const std::string short_file = text_file("mpb_short.txt", 100);  // seq_len 128 needs 252 bytes
  const std::string good = text_file("mpb_good.txt", 4096);
  const auto yaml = [](const std::string& path, int seq_len) {
    return "name: x\nmodel: {kind: bert, seq_len: " + std::to_string(seq_len) +
           "}\ndata:\n  kind: text\n  path: " + path + "\n";
  };
  expect_errors({
      {yaml(dir + "mpb_no_such_file.txt", 128), 5, 9, "data.path", "mpb_no_such_file.txt' does not exist"},
      {yaml(dir, 128), 5, 9, "data.path", "' is not a regular file"},
      {yaml(short_file, 128), 5, 9, "data.path", "' has 100 bytes; seq_len 128 needs at least 252"},
  });
  // A relative path is from the directory the runner runs in, and the message says which.
  expect_error(yaml("no_such_corpus.txt", 128), 5, 9, "data.path", "(relative to the current directory, ");
  EXPECT_EQ(load(yaml(short_file, 52)).cells.size(), 1u);  // 100 bytes are enough for seq_len 52
  EXPECT_EQ(load(yaml(good, 128)).base.data.path, good);
  // data.path means something only to data.kind text: the teacher and the Markov
  // corpus never open it.
  EXPECT_EQ(load("name: x\ndata: {kind: teacher, path: /no/such/file}\n").cells.size(), 1u);
  std::remove(short_file.c_str());
  std::remove(good.c_str());
}

}  // namespace
}  // namespace mpb

namespace mpb {
namespace {

TEST(ModelData, CheckpointingIsForBert) {
  try {
    load_experiment_from_string("name: x\ncheckpointing: sqrt\n", "x.yaml");
    ADD_FAILURE() << "MLP checkpointing accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "checkpointing");
    EXPECT_NE(std::string(e.what()).find("implemented for model.kind bert"), std::string::npos) << e.what();
  }
  const ExperimentConfig ok = load_experiment_from_string(
      "name: x\nmodel: {kind: bert}\ndata: {kind: markov}\nmatrix:\n  checkpointing: [off, every_layer, sqrt]\n",
      "x.yaml");
  EXPECT_EQ(ok.cells.size(), 3u);
}

}  // namespace
}  // namespace mpb

// ---- optimizer.decay_exclude ------------------------------------------------------------

namespace mpb {
namespace {

using namespace config_test;

const char* kBert = "model: {kind: bert}\ndata: {kind: markov}\n";

TEST(DecayExclude, DefaultsToEachModelsRecipe) {
  const ExperimentConfig mlp = load("name: x\n");
  EXPECT_FALSE(mlp.base.optimizer.decay_exclude.has_value());
  EXPECT_TRUE(effective_decay_exclude(mlp.cells[0].config).empty());  // the MLP decays every parameter
  EXPECT_EQ(config_value_string(mlp.cells[0].config, "optimizer.decay_exclude"), "[]");
  const ExperimentConfig bert = load(std::string("name: x\n") + kBert);
  EXPECT_EQ(effective_decay_exclude(bert.cells[0].config), (std::vector<ParamRole>{ParamRole::Bias, ParamRole::Norm}));
  EXPECT_EQ(config_value_string(bert.cells[0].config, "optimizer.decay_exclude"), "[bias,layernorm]");
}

TEST(DecayExclude, ListsInAnyOrderAreOneValue) {
  for (const char* text : {"[bias, layernorm]", "[layernorm, bias]", "\n    - layernorm\n    - bias"}) {
    const ExperimentConfig e = load(std::string("name: x\noptimizer:\n  decay_exclude: ") + text + "\n");
    EXPECT_EQ(config_value_string(e.cells[0].config, "optimizer.decay_exclude"), "[bias,layernorm]") << text;
  }
  const ExperimentConfig none = load(std::string("name: x\n") + kBert + "optimizer: {decay_exclude: []}\n");
  EXPECT_TRUE(effective_decay_exclude(none.cells[0].config).empty());  // BERT with decay on everything
  const ExperimentConfig bias = load("name: x\noptimizer: {decay_exclude: [bias]}\n");
  EXPECT_EQ(effective_decay_exclude(bias.cells[0].config), (std::vector<ParamRole>{ParamRole::Bias}));
  EXPECT_EQ(canonical_value_string("optimizer.decay_exclude", "[layernorm, bias]"), "[bias,layernorm]");
  for (const char* bad : {"bias", "[bias, bias]", "[gamma]", "[bias,", "{a: 1}", ""})
    EXPECT_THROW(canonical_value_string("optimizer.decay_exclude", bad), std::invalid_argument) << bad;
}

TEST(DecayExclude, BadValuesNameFileLineColAndKey) {
  expect_error("name: x\noptimizer:\n  decay_exclude: bias\n", 3, 18, "optimizer.decay_exclude",
               "expected a list of names such as [bias, layernorm] (or [] for none), got 'bias'");
  expect_error("name: x\noptimizer:\n  decay_exclude: [bias, layernrom]\n", 3, 25, "optimizer.decay_exclude[1]",
               "expected one of bias, layernorm, got 'layernrom'; did you mean 'layernorm'?");
  expect_error("name: x\noptimizer:\n  decay_exclude: [bias, bias]\n", 3, 25, "optimizer.decay_exclude[1]",
               "'bias' is listed twice (same as optimizer.decay_exclude[0])");
  expect_error("name: x\nmatrix:\n  optimizer.decay_exclude: [bias]\n", 3, 29, "matrix.optimizer.decay_exclude[0]",
               "expected a list of names such as [bias], got 'bias'; an optimizer.decay_exclude axis is a list of "
               "lists, such as [[], [bias, layernorm]]");
}

TEST(DecayExclude, AnAxisOfListsAndItsFilter) {
  const ExperimentConfig e =
      load(std::string("name: x\n") + kBert + "matrix:\n  optimizer.decay_exclude: [[], [layernorm, bias]]\n");
  ASSERT_EQ(e.cells.size(), 2u);
  EXPECT_EQ(e.cells[0].id, "optimizer.decay_exclude=[]");
  EXPECT_EQ(e.cells[1].id, "optimizer.decay_exclude=[bias,layernorm]");
  EXPECT_TRUE(cell_matches_filter(e.cells[1], "optimizer.decay_exclude=[layernorm,bias]"));
  EXPECT_FALSE(cell_matches_filter(e.cells[0], "optimizer.decay_exclude=[bias,layernorm]"));
}

}  // namespace
}  // namespace mpb
