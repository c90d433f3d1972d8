#include "ops/optimizer.h"

#include <algorithm>
#include <type_traits>

#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/dispatch.h"

namespace mpb::cpu::MPB_CPU_ISA_NS {

using scalar::Elem;

namespace {

// Calls body(EP, EG, p, g): the element types (backends/cpu/kernels/dispatch.h) and
// data of a parameter and its gradient, in any float dtype pair.
template <class Body>
void with_param_and_grad(const Tensor& param, const Tensor& grad, Body body) {
  dispatch_float2(param.dtype, grad.dtype, [&](auto P, auto G) {
    body(Elem<decltype(P)::value>{}, Elem<decltype(G)::value>{}, param.data, grad.data);
  });
}

// Calls run(lo, hi, decayed) for the maximal runs of [first, last) that lie
// outside (decayed) or inside (not decayed) the sorted, disjoint no-decay
// ranges, in order.
template <class Run>
void for_each_decay_run(int64_t first, int64_t last, const std::vector<ElementRange>& no_decay, Run run) {
  auto it = std::upper_bound(no_decay.begin(), no_decay.end(), first,
                             [](int64_t i, const ElementRange& r) { return i < r.end; });
  for (int64_t i = first; i < last;) {
    if (it == no_decay.end() || it->begin >= last) {
      run(i, last, true);
      return;
    }
    if (it->begin > i) {
      run(i, it->begin, true);
      i = it->begin;
    }
    const int64_t end = std::min(it->end, last);
    run(i, end, false);
    i = end;
    ++it;
  }
}

// Every element of [0, n) once, in parallel blocks, each block split into
// decay runs: body(lo, hi, decayed) is a plain loop the compiler vectorises,
// with no per-element range test. Blocks are large enough to amortise the
// run lookup and small enough to spread over the threads.
template <class Body>
void parallel_decay_runs(int64_t n, const std::vector<ElementRange>& no_decay, Body body) {
  constexpr int64_t kBlock = 1 << 15;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b)
    for_each_decay_run(b * kBlock, std::min(n, (b + 1) * kBlock), no_decay, body);
}

}  // namespace

void Kernels::adamw_step_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                                const AdamWHyper& h, GradScale scale, bool fused, const Tensor& param_copy,
                                const std::vector<ElementRange>& no_decay) {
  float grad_scale = 0.0f;  // a decided GradScale's factor, or the host value
  if (!resolve(scale, grad_scale)) return;  // the step was decided a skip: no update at all
  // The constants of both groups, made as a call with weight_decay 0 would make them.
  const scalar::AdamWStep decayed = scalar::make_adamw_step(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
  const scalar::AdamWStep plain = scalar::make_adamw_step(h.lr, h.beta1, h.beta2, h.eps, 0.0f, h.step);
  float* mm = static_cast<float*>(m.data);
  float* vv = static_cast<float*>(v.data);
  const int64_t n = param.numel();
  with_param_and_grad(param, grad, [&](auto ep, auto eg, void* p, const void* g) {
    using EP = decltype(ep);
    using EG = decltype(eg);
    if (fused) {
      // One pass: moments and weights (and their copy) while the element is
      // in a register. Returns the weight as stored (rounded to p's dtype).
      auto step = [&](int64_t i, const scalar::AdamWStep& s) {
        scalar::adamw_moments(EG::load(g, i) * grad_scale, mm[i], vv[i], s);
        float w = EP::load(p, i);
        scalar::adamw_param(w, mm[i], vv[i], s);
        EP::store(p, i, w);
        if constexpr (std::is_same_v<EP, Elem<DType::F32>>) {
          return w;
        } else {
          return EP::load(p, i);
        }
      };
      if (param_copy.empty()) {
        parallel_decay_runs(n, no_decay, [&](int64_t lo, int64_t hi, bool d) {
          const scalar::AdamWStep& s = d ? decayed : plain;
#pragma omp simd
          for (int64_t i = lo; i < hi; ++i) step(i, s);
        });
        return;
      }
      dispatch_float(param_copy.dtype, [&](auto C) {
        using EC = Elem<decltype(C)::value>;
        void* c = param_copy.data;
        parallel_decay_runs(n, no_decay, [&](int64_t lo, int64_t hi, bool d) {
          const scalar::AdamWStep& s = d ? decayed : plain;
#pragma omp simd
          for (int64_t i = lo; i < hi; ++i) EC::store(c, i, step(i, s));  // the copy of the stored weight
        });
      });
      return;
    }
    // Unfused: the moments in one sweep, the parameters in another, as a
    // non-fused framework optimizer reads and writes memory. The moments
    // don't involve weight decay.
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) scalar::adamw_moments(EG::load(g, i) * grad_scale, mm[i], vv[i], decayed);
    parallel_decay_runs(n, no_decay, [&](int64_t lo, int64_t hi, bool d) {
      const scalar::AdamWStep& s = d ? decayed : plain;
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        float w = EP::load(p, i);
        scalar::adamw_param(w, mm[i], vv[i], s);
        EP::store(p, i, w);
      }
    });
  });
  if (!fused && !param_copy.empty()) convert(param_copy, param);  // a separate sweep, as unfused code does
}

void Kernels::sgd_step_impl(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h,
                              GradScale scale, const std::vector<ElementRange>& no_decay) {
  float grad_scale = 0.0f;  // a decided GradScale's factor, or the host value
  if (!resolve(scale, grad_scale)) return;  // the step was decided a skip: no update at all
  const scalar::SgdStep decayed{h.lr, h.momentum, h.weight_decay};
  const scalar::SgdStep plain{h.lr, h.momentum, 0.0f};
  float* buf = static_cast<float*>(momentum_buf.data);
  const int64_t n = param.numel();
  with_param_and_grad(param, grad, [&](auto ep, auto eg, void* p, const void* g) {
    parallel_decay_runs(n, no_decay, [&](int64_t lo, int64_t hi, bool d) {
      const scalar::SgdStep& s = d ? decayed : plain;
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        float w = decltype(ep)::load(p, i);
        scalar::sgd_update(w, decltype(eg)::load(g, i) * grad_scale, buf[i], s);
        decltype(ep)::store(p, i, w);
      }
    });
  });
}

// LAMB: each tensor's two passes (ops/optimizer.h) run on one thread, the
// tensors spread over the threads; the sums of squares accumulate in double.
// `scratch` is unused: the sums live in registers here.
void Kernels::lamb_step_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                               const LambHyper& h, GradScale scale, const Tensor& param_copy,
                               const std::vector<LambTensor>& tensors, const Tensor& /*scratch*/) {
  float grad_scale = 0.0f;  // a decided GradScale's factor, or the host value
  if (!resolve(scale, grad_scale)) return;  // the step was decided a skip: no update at all
  const scalar::LambStep s = scalar::make_lamb_step(h.beta1, h.beta2, h.eps, h.weight_decay, h.bias_correction, h.step);
  float* mm = static_cast<float*>(m.data);
  float* vv = static_cast<float*>(v.data);
  const int64_t count = static_cast<int64_t>(tensors.size());
  const DType copy_t = param_copy.empty() ? DType::F32 : param_copy.dtype;
  with_param_and_grad(param, grad, [&](auto ep, auto eg, void* p, const void* g) {
    using EP = decltype(ep);
    using EG = decltype(eg);
    dispatch_float(copy_t, [&](auto C) {
      using EC = Elem<decltype(C)::value>;
      void* c = param_copy.data;  // null: no copy
#pragma omp parallel for schedule(dynamic)
      for (int64_t k = 0; k < count; ++k) {
        const LambTensor& t = tensors[static_cast<size_t>(k)];
        double w_sq = 0.0, u_sq = 0.0;
        for (int64_t i = t.begin; i < t.end; ++i) {
          scalar::lamb_moments(EG::load(g, i) * grad_scale, mm[i], vv[i], s);
          const float w = EP::load(p, i);
          const float u = scalar::lamb_direction(w, mm[i], vv[i], s, t.decayed);
          w_sq += double(w) * double(w);
          u_sq += double(u) * double(u);
        }
        const float scaled_lr = scalar::lamb_scaled_lr(h.lr, w_sq, u_sq);
        for (int64_t i = t.begin; i < t.end; ++i) {
          float w = EP::load(p, i);
          scalar::lamb_param(w, scalar::lamb_direction(w, mm[i], vv[i], s, t.decayed), scaled_lr);
          EP::store(p, i, w);
          if (c != nullptr) EC::store(c, i, EP::load(p, i));  // the copy of the stored (rounded) weight
        }
      }
    });
  });
}

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
