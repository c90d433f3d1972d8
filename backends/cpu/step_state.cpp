// The CPU device's host-side state between ops: the loss ops' deferred sum,
// the last decide_step's decision, and how the optimizer kernels resolve a
// GradScale against it. The one place the CPU's ops do more than run a loop.
#include "backends/cpu/cpu_device_impl.h"
#include "ops/optimizer.h"

namespace mpb::cpu {

double CpuDevice::loss_result(double loss, bool deferred) {
  if (!deferred) return loss;
  loss_sum_ += loss;
  return 0.0;
}

double CpuDevice::read_loss_sum_impl() {
  const double sum = loss_sum_;
  loss_sum_ = 0.0;
  return sum;
}

// The decision is the host's: the same statistics as stats(), and the scalar
// core the CUDA backend runs on the device.
void CpuDevice::decide_step_impl(const Tensor& grads, double loss_scale, double grad_clip) {
  const TensorStats st = stats_impl(grads);
  const scalar::StepDecision d = scalar::decide_step(st.sum_squares, st.nonfinite, loss_scale, grad_clip);
  decision_ = StepResults{0.0, st, d.skip, d.norm, d.grad_scale};
}

StepResults CpuDevice::read_step_results_impl() {
  StepResults r = decision_;
  r.loss_sum = read_loss_sum_impl();
  return r;
}

bool CpuDevice::resolve(GradScale grad_scale, float& factor) const {
  if (!grad_scale.is_decided()) {
    factor = grad_scale.value();
    return true;
  }
  factor = decision_.grad_scale;
  return !decision_.skip;
}

}  // namespace mpb::cpu
