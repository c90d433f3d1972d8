// What Google Benchmark itself costs per iteration, measured with the library
// this build links. Debian's libbenchmark is built without NDEBUG, so every run
// prints "***WARNING*** Library was built as DEBUG. Timings may be affected."
// (issue 18). The per-iteration loop (`for (auto _ : state)`) is inline in
// benchmark.h and compiled here, with this project's Release flags; the
// library's own code runs once per batch of iterations (starting and stopping
// the timers). So an empty loop's time per iteration, and a single iteration's
// time, bound what the debug library can add to a benchmark's iteration and to
// its batch: compare them with the milliseconds per iteration of the others
// (bench_main.cpp says so in the output's context; docs/ARCHITECTURE.md has
// the figures).
#include <benchmark/benchmark.h>

namespace {

void BM_HarnessOverhead(benchmark::State& state) {
  int64_t n = 0;
  for (auto _ : state) benchmark::DoNotOptimize(++n);
}
// Many iterations: the loop's cost per iteration. One iteration: also the
// library's timer start and stop around it, the debug code a batch pays once.
BENCHMARK(BM_HarnessOverhead)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_HarnessOverhead)->Iterations(1)->Repetitions(5)->Unit(benchmark::kNanosecond);

}  // namespace
