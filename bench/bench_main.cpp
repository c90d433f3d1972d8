// mpb_bench's main: Google Benchmark's own, plus a context line that answers
// the library's "built as DEBUG" warning with the measurement that bounds it
// (bench_harness.cpp).
#include <benchmark/benchmark.h>

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
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
