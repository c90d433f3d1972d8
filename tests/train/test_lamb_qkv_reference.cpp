// LAMB on BERT against the paper's algorithm in float64 (opcheck/reference.h
// paper_lamb_layer, which shares no code with ops/optimizer.h) on a model
// with separate query, key and value Linears, as NVIDIA's BERT recipe has:
// the reference cuts each packed attention.qkv weight [3C, C] and bias [3C]
// into its three layers by name here, not through train/lamb_tensors.h.
// optimizer.lamb_qkv split (the default) must match it; packed must match the
// reference that keeps QKV whole, and the two references must be far apart
// on the QKV tensors, so the check tells the modes apart.
//
// Each step starts the reference from the device's weights and moments and
// the gradients the step used (the trainer leaves them in model.grads()), so
// the comparison is one step deep: tolerance 1e-6 (|w| + 0.05) per weight,
// the opcheck lamb_step bound for one step (about ten fp32 roundings of a
// move the trust ratio keeps near lr ||w||, so ~1000x below a step's move).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "opcheck/reference.h"
#include "train/cell_factory.h"
#include "train/trainer.h"
#include "tests/models/model_test_helpers.h"

namespace mpb {
namespace {

CellConfig bert_lamb_cell(LambQkv qkv) {
  CellConfig c = model_test::tiny_bert_cell();
  c.model.dropout = 0.0;
  c.data.eval_samples = 8;
  c.steps = 3;
  c.warmup_steps = 0;
  c.optimizer.kind = OptimizerKind::Lamb;
  c.optimizer.lr = 0.01;
  c.optimizer.eps = 1e-6;
  c.optimizer.weight_decay = 0.01;
  c.optimizer.decay_exclude = std::vector<ParamRole>{ParamRole::Bias, ParamRole::Norm};
  c.optimizer.lamb_qkv = qkv;
  return c;
}

std::vector<double> download(Device& dev, const Tensor& t) {
  std::vector<float> f(static_cast<size_t>(t.numel()));
  dev.download(f.data(), t);
  return std::vector<double>(f.begin(), f.end());
}

// One LAMB step of the paper over the flat parameters, layer by layer: the
// QKV tensors as three layers each (split) or whole.
std::vector<double> reference_step(const std::vector<ParamInfo>& params, std::vector<double> w, std::vector<double> m,
                                   std::vector<double> v, const std::vector<double>& g, const opcheck::PaperLamb& h,
                                   bool split_qkv, long long t) {
  for (const ParamInfo& p : params) {
    const int64_t n = p.shape.numel();
    const bool qkv = p.name.find("attention.qkv.") != std::string::npos;
    const int64_t layers = qkv && split_qkv ? 3 : 1;
    for (int64_t k = 0; k < layers; ++k) {
      const auto b = static_cast<ptrdiff_t>(p.offset + k * (n / layers)), e = b + static_cast<ptrdiff_t>(n / layers);
      std::vector<double> x(w.begin() + b, w.begin() + e), gs(g.begin() + b, g.begin() + e);
      std::vector<double> ms(m.begin() + b, m.begin() + e), vs(v.begin() + b, v.begin() + e);
      opcheck::paper_lamb_layer(x, gs, ms, vs, h, p.role == ParamRole::Weight, t);
      std::copy(x.begin(), x.end(), w.begin() + b);
    }
  }
  return w;
}

void check_mode(LambQkv mode) {
  const CellConfig c = bert_lamb_cell(mode);
  auto dev = make_cpu_device();
  auto model = build_model(*dev, c, 5);
  auto data = build_dataset(c, 5);
  Trainer trainer(*dev, *model, *data, c);
  const opcheck::PaperLamb h{c.optimizer.lr, c.optimizer.beta1, c.optimizer.beta2, c.optimizer.eps,
                             c.optimizer.weight_decay, c.optimizer.bias_correction};
  const bool split = mode == LambQkv::Split;
  double other_apart = 0.0;  // the other mode's reference, in tolerances, on the QKV tensors
  for (int step = 1; step <= c.steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const std::vector<double> w0 = download(*dev, model->params());
    const std::vector<double> m0 = download(*dev, trainer.optimizer_state(0));
    const std::vector<double> v0 = download(*dev, trainer.optimizer_state(1));
    trainer.step(step);
    const std::vector<double> w1 = download(*dev, model->params());
    const std::vector<double> g = download(*dev, model->grads());
    const auto& params = model->param_info();
    const std::vector<double> ref = reference_step(params, w0, m0, v0, g, h, split, step);
    const std::vector<double> other = reference_step(params, w0, m0, v0, g, h, !split, step);
    for (const ParamInfo& p : params) {
      const bool qkv = p.name.find("attention.qkv.") != std::string::npos;
      int bad = 0;
      for (int64_t i = p.offset; i < p.offset + p.shape.numel(); ++i) {
        const auto u = static_cast<size_t>(i);
        const double tol = 1e-6 * (std::fabs(ref[u]) + 0.05);
        if (std::fabs(w1[u] - ref[u]) > tol && bad++ < 3)
          ADD_FAILURE() << p.name << " element " << i - p.offset << ": " << w1[u] << " vs reference " << ref[u];
        if (qkv) other_apart = std::max(other_apart, std::fabs(other[u] - ref[u]) / tol);
      }
    }
  }
  // A trainer in the other mode would fail the check by far.
  EXPECT_GT(other_apart, 100.0);
}

TEST(LambQkvReference, SplitMatchesSeparateQueryKeyValueLayers) { check_mode(LambQkv::Split); }

TEST(LambQkvReference, PackedMatchesOneTensorForQkv) { check_mode(LambQkv::Packed); }

TEST(LambQkvReference, SplitIsTheDefault) { EXPECT_EQ(CellConfig{}.optimizer.lamb_qkv, LambQkv::Split); }

}  // namespace
}  // namespace mpb
