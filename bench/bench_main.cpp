// mpb_bench's main: Google Benchmark's own, plus a context line that answers
// the library's "built as DEBUG" warning with the measurement that bounds it
// (bench_harness.cpp).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>

#include "backends/cpu/cpu_device.h"

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // Printed with the run's context, before the library's warning, and kept in --benchmark_format=json.
  benchmark::AddCustomContext(
      "libbenchmark_debug_warning",
      "Debian's libbenchmark is built without NDEBUG, hence 'Library was built as DEBUG'. Its code runs "
      "once per batch of iterations; the iteration loop is inline and compiled with mpbench's Release flags. "
      "BM_HarnessOverhead is that loop's whole cost per iteration (nanoseconds), against milliseconds per "
      "iteration in every other benchmark here (bench/bench_harness.cpp)");
  // Which build of the CPU kernels every benchmark here runs (MPB_CPU_ISA picks one), and oneDNN's.
  try {
    const std::unique_ptr<mpb::Device> cpu = mpb::make_cpu_device();
    benchmark::AddCustomContext("cpu_kernels", cpu->info().kernel_isa + " (" + cpu->info().kernel_isa_source + ")");
    benchmark::AddCustomContext("gemm_isa", cpu->info().gemm_isa);
  } catch (const mpb::DeviceError& e) {
    std::fprintf(stderr, "mpb_bench: %s\n", e.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
