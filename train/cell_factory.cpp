#include "train/cell_factory.h"

#include <stdexcept>

#include "core/precision.h"
#include "models/mlp.h"
#include "models/teacher_data.h"

namespace mpb {

std::unique_ptr<Model> build_model(Device& dev, const CellConfig& cfg, uint64_t seed) {
  const int64_t micro = cfg.batch_size / cfg.accumulation;
  if (cfg.model.kind == "mlp") {
    MlpConfig m;
    m.input_dim = cfg.data.input_dim;
    m.width = cfg.model.width;
    m.hidden_layers = cfg.model.hidden_layers;
    m.classes = cfg.data.classes;
    m.activation = cfg.model.activation == "relu" ? Activation::Relu : Activation::Gelu;
    m.init_scale = cfg.model.init_scale;
    m.fused = cfg.fusion == "on";
    return make_mlp(dev, m, resolve_policy(cfg.precision), micro, seed);
  }
  throw std::invalid_argument("model.kind '" + cfg.model.kind + "' has no builder");
}

std::unique_ptr<Dataset> build_dataset(const CellConfig& cfg, uint64_t seed) {
  if (cfg.data.kind == "teacher")
    return std::make_unique<TeacherData>(seed, cfg.data.input_dim, cfg.data.classes, cfg.data.teacher_hidden);
  throw std::invalid_argument("data.kind '" + cfg.data.kind + "' has no builder");
}

}  // namespace mpb
