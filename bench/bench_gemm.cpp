// GEMM throughput on the CPU device: the square "ceiling" GEMM and the shapes
// of an MLP training step (4 x 1024, batch 256). Counters report GFLOP/s.
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/cpu_device.h"
#include "core/rng.h"

namespace {

using namespace mpb;

struct GemmCase {
  int64_t m, n, k;
  bool ta, tb;
};

void run_gemm(benchmark::State& state, GemmCase c, GemmCompute compute) {
  auto dev = make_cpu_device();
  const DType op = compute == GemmCompute::BF16 ? DType::BF16 : (compute == GemmCompute::F16 ? DType::F16 : DType::F32);
  DeviceBuffer a32 = dev->alloc(Shape{c.m * c.k}, DType::F32, MemCategory::Workspace);
  DeviceBuffer b32 = dev->alloc(Shape{c.k * c.n}, DType::F32, MemCategory::Workspace);
  Rng rng(7);
  std::vector<float> ha(static_cast<size_t>(c.m * c.k)), hb(static_cast<size_t>(c.k * c.n));
  for (float& v : ha) v = float(rng.uniform(-1, 1));
  for (float& v : hb) v = float(rng.uniform(-1, 1));
  dev->upload(a32, ha.data());
  dev->upload(b32, hb.data());
  DeviceBuffer a = dev->alloc(Shape{c.m * c.k}, op, MemCategory::Workspace);
  DeviceBuffer b = dev->alloc(Shape{c.k * c.n}, op, MemCategory::Workspace);
  dev->cast(a, a32);
  dev->cast(b, b32);
  DeviceBuffer out = dev->alloc(Shape{c.m * c.n}, DType::F32, MemCategory::Workspace);
  GemmArgs g;
  g.m = c.m, g.n = c.n, g.k = c.k, g.trans_a = c.ta, g.trans_b = c.tb;
  g.a = a, g.b = b, g.c = out, g.compute = compute;
  for (auto _ : state) dev->gemm(g);
  // FLOPs per iteration as a rate: Google Benchmark divides by the time.
  state.counters["GFLOPs"] = benchmark::Counter(2e-9 * double(c.m) * double(c.n) * double(c.k),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// Each benchmark once per compute type, named by it (BM_GemmCeiling/fp32,
// BM_GemmCeiling/bf16), as bench_ops.cpp names its cases: a filter or a JSON
// reader sees what ran, not an enum's number.
#define MPB_BENCH_GEMM_COMPUTES(fn)                                                                 \
  BENCHMARK_CAPTURE(fn, fp32, GemmCompute::F32)->Unit(benchmark::kMillisecond)->UseRealTime();      \
  BENCHMARK_CAPTURE(fn, bf16, GemmCompute::BF16)->Unit(benchmark::kMillisecond)->UseRealTime()

void BM_GemmCeiling(benchmark::State& state, GemmCompute compute) {
  run_gemm(state, {2048, 2048, 2048, false, false}, compute);
}
MPB_BENCH_GEMM_COMPUTES(BM_GemmCeiling);

// The three GEMMs of one Linear(1024, 1024) layer at batch 256.
void BM_GemmMlpForward(benchmark::State& s, GemmCompute c) { run_gemm(s, {256, 1024, 1024, false, true}, c); }
void BM_GemmMlpGradW(benchmark::State& s, GemmCompute c) { run_gemm(s, {1024, 1024, 256, true, false}, c); }
void BM_GemmMlpGradX(benchmark::State& s, GemmCompute c) { run_gemm(s, {256, 1024, 1024, false, false}, c); }
MPB_BENCH_GEMM_COMPUTES(BM_GemmMlpForward);
MPB_BENCH_GEMM_COMPUTES(BM_GemmMlpGradW);
MPB_BENCH_GEMM_COMPUTES(BM_GemmMlpGradX);

}  // namespace
