#include "runner/commands/reference_export.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/numerics.h"
#include "runner/io/atomic_file.h"
#include "runner/machine/device_factory.h"
#include "runner/measure/memory_fit.h"
#include "runner/io/safetensors.h"
#include "train/cell_factory.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace mpb {

namespace {

std::vector<int64_t> dims(const Shape& s) { return std::vector<int64_t>(s.dims.begin(), s.dims.begin() + s.ndim); }

// A device tensor of any float dtype as fp32 host values.
std::vector<float> download_f32(Device& dev, const Tensor& t) {
  std::vector<float> host(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F32) {
    dev.download(host.data(), t);
  } else {
    DeviceBuffer staging = dev.alloc(t.shape, DType::F32, MemCategory::Workspace);
    dev.cast(staging, t);
    dev.download(host.data(), staging);
  }
  return host;
}

// Uploads batch `b` into the model's input buffers (as the trainer does:
// token ids, or features converted on the host to the input dtype) and labels
// into `y`; all b.size rows.
void upload_batch(Device& dev, Model& model, const HostBatch& b, const Tensor& y) {
  const Tensor x = model.input().row_slice(0, b.size);
  if (x.dtype == DType::I32) {
    dev.upload(x, b.ids.data());
  } else if (x.dtype == DType::F32) {
    dev.upload(x, b.x.data());
  } else {
    std::vector<uint16_t> staging(b.x.size());
    for (size_t i = 0; i < b.x.size(); ++i)
      staging[i] = x.dtype == DType::F16 ? float_to_half_bits(b.x[i]) : float_to_bf16_bits(b.x[i]);
    dev.upload(x, staging.data());
  }
  const Tensor mask = model.input_mask();
  if (!mask.empty()) {
    if (b.mask.size() != b.ids.size()) throw std::invalid_argument("export: the model needs an attention mask");
    dev.upload(mask.row_slice(0, b.size), b.mask.data());
  }
  dev.upload(y, b.y.data());
}

// The parameters as F32 tensors named by ParamInfo, from the flat `values`.
void add_params(SafetensorsWriter& w, const std::string& prefix, const std::vector<ParamInfo>& info,
                const std::vector<float>& values) {
  for (const ParamInfo& p : info)
    w.add(prefix + p.name, "F32", dims(p.shape), values.data() + p.offset, static_cast<size_t>(p.shape.numel()) * 4);
}

// weights.safetensors: the initial parameters.
void write_weights(const fs::path& out, const std::string& cell_meta, const std::vector<ParamInfo>& info,
                   const std::vector<float>& w0) {
  SafetensorsWriter w;
  w.set_metadata("format", "mpbench-reference-weights");
  w.set_metadata("cell", cell_meta);
  add_params(w, "", info, w0);
  w.write((out / "weights.safetensors").string());
}

// batches.safetensors: the host batches of steps 1..kReferenceSteps, returned.
std::vector<HostBatch> write_batches(const fs::path& out, const std::string& cell_meta, const Dataset& data,
                                     int64_t batch_size) {
  std::vector<HostBatch> batches;
  SafetensorsWriter w;
  w.set_metadata("format", "mpbench-reference-batches");
  w.set_metadata("cell", cell_meta);
  w.set_metadata("steps", std::to_string(kReferenceSteps));
  for (int s = 1; s <= kReferenceSteps; ++s) {
    HostBatch b = data.train_batch(s, batch_size);
    const std::string p = "step" + std::to_string(s) + ".";
    const std::vector<int64_t> xs{b.size, b.row_width};
    if (!b.ids.empty()) {
      w.add_i32(p + "ids", xs, b.ids);
      if (!b.mask.empty()) w.add_i32(p + "mask", xs, b.mask);
    } else {
      w.add_f32(p + "x", xs, b.x);
    }
    w.add_i32(p + "y", {static_cast<int64_t>(b.y.size())}, b.y);
    batches.push_back(std::move(b));
  }
  w.write((out / "batches.safetensors").string());
  return batches;
}

// Step 1: one forward + backward of the mean loss (no loss scale, no loss
// weight), gradients overwritten: its logits, loss and gradients into `res`.
void add_step_one(SafetensorsWriter& res, Device& dev, Model& model, const HostBatch& b1, const CellConfig& cfg,
                  int64_t rows, const std::vector<ParamInfo>& info) {
  const int64_t labels = std::max<int64_t>(1, b1.label_count());
  DeviceBuffer y = dev.alloc(Shape{rows}, DType::I32, MemCategory::Activations);
  upload_batch(dev, model, b1, y);
  model.train_micro(model.input().row_slice(0, cfg.batch_size), y, float(1.0 / double(labels)),
                    GradMode::Overwrite);
  const double loss_sum = dev.read_loss_sum();
  Tensor logits = model.logits();
  if (logits.empty())
    throw std::runtime_error("model '" + config_value_string(cfg, "model.kind") + "' has no logits() (needed for the reference export)");
  // A head that decodes only the labelled positions (BERT's sparse MLM head)
  // has fewer logits rows than labels, the labelled positions first, in
  // order: those rows are exported (the rest pad a fixed shape), and
  // torch_reference.py keeps the same rows of its dense logits.
  if (logits.rows() != rows) logits = logits.row_slice(0, b1.label_count());
  res.add_f32("logits", dims(logits.shape), download_f32(dev, logits));
  res.add_f64("loss", {}, {loss_sum / double(labels)});
  add_params(res, "grad.", info, download_f32(dev, model.grads()));
}

// kReferenceSteps training steps as the runner trains: a fresh model and
// trainer, warm-up, then steps 1..N with the cell's own settings.
void add_training_steps(SafetensorsWriter& res, Device& dev, const Dataset& data, const CellConfig& cfg,
                        uint64_t seed, const std::vector<ParamInfo>& info) {
  std::unique_ptr<Model> m = build_model(dev, cfg, seed);
  Trainer t(dev, *m, data, cfg);
  t.warm_up();
  for (int s = 1; s <= kReferenceSteps; ++s) t.step(s);
  const RunRecord& r = t.record();
  res.add_f64("train.loss", {kReferenceSteps}, r.loss);
  res.add_f64("train.grad_norm", {kReferenceSteps}, r.grad_norm);
  std::vector<int32_t> skipped(r.skipped.begin(), r.skipped.end());
  res.add_i32("train.skipped", {kReferenceSteps}, skipped);
  // The weights after the last step: where an optimizer bug shows directly.
  add_params(res, "final.", info, download_f32(dev, m->params()));
}

// meta.json: what the files hold and how torch_reference.py is to read them.
void write_meta(const fs::path& out, const ExperimentConfig& exp, const Cell& cell, const Dataset& data,
                const std::vector<ParamInfo>& info, const HostBatch& b1, const std::string& describe) {
  const CellConfig& cfg = cell.config;
  nlohmann::json meta;
  meta["format"] = "mpbench-reference";
  meta["version"] = 1;
  meta["experiment"] = exp.name;
  meta["experiment_file"] = exp.path;
  meta["cell_id"] = cell.id;
  meta["device"] = "cpu";
  meta["seed"] = cfg.seed;
  meta["steps"] = kReferenceSteps;
  meta["batch_size"] = cfg.batch_size;
  meta["config"] = cell_config_to_json(cfg);
  meta["model"] = {{"kind", config_value_string(cfg, "model.kind")}, {"describe", describe}};
  nlohmann::json params = nlohmann::json::array();
  for (const ParamInfo& p : info) params.push_back({{"name", p.name}, {"shape", dims(p.shape)}});
  meta["params"] = params;
  meta["data"] = {{"kind", config_value_string(cfg, "data.kind")},
                  {"row_width", data.row_width()},
                  {"labels_per_sample", data.labels_per_sample()},
                  {"inputs", b1.ids.empty() ? "x" : (b1.mask.empty() ? "ids" : "ids+mask")}};
  meta["labels"] = {
      {"ignore", "label < 0"},
      {"loss", "softmax cross-entropy summed over labels >= 0, divided by their count (at least 1)"}};
  meta["files"] = {{"weights", "weights.safetensors"},
                   {"batches", "batches.safetensors"},
                   {"mpbench", "mpbench.safetensors"},
                   {"reference", "reference.safetensors"}};
  write_file_atomic((out / "meta.json").string(), meta.dump(2) + "\n");
}

}  // namespace

void export_reference(const ExperimentConfig& exp, const Cell& cell, const std::string& dir) {
  const CellConfig& cfg = cell.config;
  const uint64_t seed = cfg.seed;  // repeat 0
  std::unique_ptr<Device> dev = make_device("cpu");
  std::unique_ptr<Dataset> data = build_dataset(cfg, seed);
  const int64_t B = cfg.batch_size;
  const int64_t rows = B * data->labels_per_sample();  // label rows = logits rows

  // One micro-batch of the whole batch for the step-1 forward/backward (the
  // weights don't depend on the micro-batch size, only on the seed).
  CellConfig one = cfg;
  one.accumulation = 1;
  std::unique_ptr<Model> model = build_model(*dev, one, seed);
  if (model->micro_batch() != B) throw std::logic_error("export: micro-batch != batch_size");
  const std::vector<ParamInfo> info = model->param_info();  // a copy: the model goes before meta.json

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  const fs::path out(dir);
  const std::string cell_meta = exp.name + " / " + cell.id;
  write_weights(out, cell_meta, info, download_f32(*dev, model->params()));
  const std::vector<HostBatch> batches = write_batches(out, cell_meta, *data, B);

  SafetensorsWriter res;
  res.set_metadata("format", "mpbench-reference-results");
  res.set_metadata("cell", cell_meta);
  res.set_metadata("source", "mpbench");
  add_step_one(res, *dev, *model, batches.front(), cfg, rows, info);
  const std::string describe = model->describe();
  model.reset();
  add_training_steps(res, *dev, *data, cfg, seed, info);
  res.write((out / "mpbench.safetensors").string());
  write_meta(out, exp, cell, *data, info, batches.front(), describe);
}

int run_export_reference(const ExperimentConfig& exp, const std::string& filter, const std::string& dir) {
  std::vector<const Cell*> match;
  try {
    for (const Cell& c : exp.cells)
      if (filter.empty() || cell_matches_filter(c, filter)) match.push_back(&c);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "error: --filter: %s\n", e.what());
    return 2;
  }
  if (match.size() != 1) {
    std::fprintf(stderr, "error: --export-reference needs exactly one cell; %s matches %zu of %s's %zu%s\n",
                 filter.empty() ? "no --filter" : ("--filter '" + filter + "'").c_str(), match.size(),
                 exp.path.c_str(), exp.cells.size(), match.empty() ? "" : ":");
    for (const Cell* c : match) std::fprintf(stderr, "  %s\n", c->id.c_str());
    if (match.size() > 1) std::fprintf(stderr, "narrow it with --filter key=value[,key=value...]\n");
    return 2;
  }
  if (const int rc = refuse_cells_that_cannot_fit(exp, match, "cpu")) return rc;  // it runs on the CPU
  try {
    export_reference(exp, *match.front(), dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: --export-reference: %s\n", e.what());
    return 1;
  }
  std::printf("exported %s (%s) to %s\n", match.front()->id.c_str(), exp.name.c_str(), dir.c_str());
  return 0;
}

}  // namespace mpb
