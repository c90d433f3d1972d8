// The parameters of a model: a table (PyTorch state-dict names, shapes,
// offsets into one flat buffer, so a fused optimizer is one pass over all of
// them) and the storage a precision policy asks for (docs/ARCHITECTURE.md,
// "Precision policies"):
//
//   buffer            when                                    dtype
//   master weights    param is fp32 (they are the parameters)  fp32
//                     or apex O2 (a copy beside half ones)
//   half parameters   param is half (O2, O3, JMP params=half)  param
//   GEMM weight copy  compute differs from param (autocast's   compute
//                     cast weights)
//   gradients         always                                   param
//
// A model adds its tensors, calls allocate(), uploads its host-initialised
// weights once, and reads per-tensor views (ref) in its forward and backward
// passes; params(), grads(), weight_copy() and load_compute_weights() are
// what the Model interface hands the trainer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/precision.h"
#include "models/fp8_linears.h"
#include "models/model.h"

namespace mpb {

// One parameter tensor as the forward/backward code uses it:
//   p  the parameter in the param dtype (biases, LayerNorm, embedding gathers)
//   c  what the GEMMs read: the compute-dtype copy, or p where they agree
//   g  its gradient, in the param dtype
// A default ParamRef is empty (all three views empty).
struct ParamRef {
  Tensor p, c, g;
};

class ParamStore {
 public:
  ParamStore(Device& dev, const PrecisionPolicy& policy) : dev_(&dev), pol_(policy) {}

  // The table: tensors at consecutive offsets in the order added. Returns the
  // tensor's index (for ref). Only before allocate(). packed_layers:
  // ParamInfo::packed_layers (it must divide shape[0]).
  int add(const std::string& name, Shape shape, ParamRole role, int packed_layers = 1);
  const std::vector<ParamInfo>& info() const { return info_; }
  int64_t numel() const { return numel_; }  // all parameters together

  // The storage for the table, by the policy (the buffers above, allocated
  // in that order: master, half parameters, compute copy, gradients).
  void allocate();
  bool allocated() const { return !grads_.empty(); }

  // Views of tensor `index` (after allocate()).
  ParamRef ref(int index) const;

  // Initial weights: `host` is fp32 in the table's layout (numel() values).
  // Uploaded into the master weights, or cast into the half parameters when
  // there are none (O3), then load_compute_weights().
  void upload(const std::vector<float>& host);

  // --- what Model forwards to the trainer -------------------------------------
  // The flat weights the optimizer updates: the fp32 master weights, or the
  // half parameters themselves when the policy keeps no master copy (O3).
  Tensor params() const { return master_.empty() ? half_.tensor() : master_.tensor(); }
  Tensor grads() const { return grads_.tensor(); }
  // The one copy that load_compute_weights refreshes, for a fused optimizer
  // to write in its own pass: the compute copy (autocast), O2's half
  // parameters, or empty (fp32, O3, ...).
  Tensor weight_copy() const;
  // Refreshes the weights the forward pass reads from the updated ones:
  // master -> half parameters (O2), then parameters -> compute copy.
  void load_compute_weights();

  // --- the buffers, for tests (empty where the policy keeps none) ------------
  Tensor master() const { return master_.tensor(); }
  Tensor half_params() const { return half_.tensor(); }
  Tensor compute_weights() const { return compute_.tensor(); }
  // The parameters in the param dtype (half parameters, or the master weights).
  Tensor model_params() const { return half_.empty() ? master_.tensor() : half_.tensor(); }

 private:
  Device* dev_;
  PrecisionPolicy pol_;
  std::vector<ParamInfo> info_;
  int64_t numel_ = 0;
  DeviceBuffer master_, half_, compute_, grads_;
};

// A Model whose parameters live in a ParamStore: the Model members that hand
// the trainer the store's buffers, written once for every such model.
class StoredParamsModel : public Model {
 public:
  const std::vector<ParamInfo>& param_info() const override { return store_.info(); }
  Tensor params() override { return store_.params(); }
  Tensor grads() override { return store_.grads(); }
  Tensor weight_copy() override { return store_.weight_copy(); }
  void load_compute_weights() override { store_.load_compute_weights(); }
  Fp8Linears* fp8() override { return fp8_.get(); }

 protected:
  StoredParamsModel(Device& dev, const PrecisionPolicy& policy)
      : store_(dev, policy), fp8_(policy.fp8 ? std::make_unique<Fp8Linears>(dev, policy.fp8_recipe) : nullptr) {}

  ParamStore store_;
  std::unique_ptr<Fp8Linears> fp8_;  // precision fp8: the linear layers' scales; else null
};

}  // namespace mpb
