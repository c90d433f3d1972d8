#include "runner/measure/ceiling.h"

#include <algorithm>
#include <vector>

#include "core/rng.h"

namespace mpb {

int ceiling_gemm_size(const Device& dev) { return dev.info().kind == DeviceKind::Cuda ? 8192 : 1024; }

double measure_gemm_ceiling(Device& dev, GemmCompute compute, int n, int reps, const std::atomic<bool>* stop) {
  auto stopped = [&] { return stop && stop->load(); };
  if (n <= 0) n = ceiling_gemm_size(dev);
  const DType op = (compute == GemmCompute::F16) ? DType::F16 : (compute == GemmCompute::BF16 ? DType::BF16 : DType::F32);
  DeviceBuffer a32 = dev.alloc(Shape{n, n}, DType::F32, MemCategory::Workspace);
  DeviceBuffer b32 = dev.alloc(Shape{n, n}, DType::F32, MemCategory::Workspace);
  std::vector<float> host(static_cast<size_t>(n) * n);
  Rng rng(42);
  for (float& v : host) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  dev.upload(a32, host.data());
  dev.upload(b32, host.data());
  DeviceBuffer a, b;
  if (op != DType::F32) {
    a = dev.alloc(Shape{n, n}, op, MemCategory::Workspace);
    b = dev.alloc(Shape{n, n}, op, MemCategory::Workspace);
    dev.cast(a, a32);
    dev.cast(b, b32);
  }
  DeviceBuffer c = dev.alloc(Shape{n, n}, DType::F32, MemCategory::Workspace);
  GemmArgs g;
  g.m = g.n = g.k = n;
  g.a = op == DType::F32 ? a32.tensor() : a.tensor();
  g.b = op == DType::F32 ? b32.tensor() : b.tensor();
  g.c = c;
  g.compute = compute;
  auto timer = dev.make_timer();
  if (stopped()) return 0.0;
  dev.gemm(g);  // warm-up: primitive creation, caches, clocks
  double best_ms = 1e300;
  for (int r = 0; r < reps && !stopped(); ++r) {
    timer->start();
    dev.gemm(g);
    timer->stop();
    best_ms = std::min(best_ms, timer->elapsed_ms());
  }
  return best_ms < 1e300 ? 2.0 * double(n) * n * n / (best_ms * 1e6) : 0.0;
}

}  // namespace mpb
