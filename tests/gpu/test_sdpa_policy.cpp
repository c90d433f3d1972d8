// The cuDNN SDPA path's decisions that need no GPU (backends/cuda/
// sdpa_policy.h, backends/cuda/ordinal_plan_cache.h), run on the CPU in every
// build: the two padding-bias forms read the same [B, Tk] values, which form
// follows a refusal, what each build step's failure means, the labels a cell
// records, and the process-wide plan cache across two device lifetimes (a
// hit, no rebuild; a handle failure kept and reported once; plans destroyed
// before their handle). What only cuDNN can tell (which form it accepts, the
// results of either) is in test_cudnn_attention.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/ordinal_plan_cache.h"
#include "backends/cuda/sdpa_policy.h"

namespace mpb::cuda {
namespace {

// The element offset a 4-d tensor description reads for logical index
// (b, h, i, j) of the [B,H,Tq,Tk] scores it is added to: a dimension of 1
// broadcasts (index 0), as in cuDNN's pointwise ops.
int64_t bias_offset(const SdpaBiasDims& d, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t idx[4] = {b, h, i, j};
  int64_t off = 0;
  for (int a = 0; a < 4; ++a) off += (d.dim[a] == 1 ? 0 : idx[a]) * d.stride[a];
  return off;
}

TEST(SdpaPolicy, BothBiasFormsReadTheSameKeyValidValues) {
  const int64_t B = 3, H = 2, Tq = 5, Tk = 7;
  const SdpaBiasDims broadcast = sdpa_bias_dims(SdpaBiasForm::kBroadcast, B, Tq, Tk);
  const SdpaBiasDims per_query = sdpa_bias_dims(SdpaBiasForm::kPerQuery, B, Tq, Tk);
  EXPECT_EQ(broadcast.dim, (std::array<int64_t, 4>{B, 1, 1, Tk}));
  EXPECT_EQ(per_query.dim, (std::array<int64_t, 4>{B, 1, Tq, Tk}));
  EXPECT_EQ(per_query.stride, (std::array<int64_t, 4>{Tk, Tk, 0, 1}));  // the retry
  // Every score (b, h, i, j) gets bias[b * Tk + j] (key j of batch b) in
  // both forms, and no read leaves the B * Tk elements attention_sdpa_call.cu writes.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t j = 0; j < Tk; ++j) {
          EXPECT_EQ(bias_offset(broadcast, b, h, i, j), b * Tk + j);
          EXPECT_EQ(bias_offset(per_query, b, h, i, j), b * Tk + j);
        }
}

TEST(SdpaPolicy, ForwardTriesThePerQueryFormThenTheBroadcastFormThenTheKernel) {
  SdpaBiasAttempts a(/*backward=*/false);
  EXPECT_EQ(a.form(), SdpaBiasForm::kPerQuery);
  EXPECT_TRUE(a.failed(SdpaFailure::kRefused));
  EXPECT_EQ(a.form(), SdpaBiasForm::kBroadcast);
  EXPECT_FALSE(a.done());
  EXPECT_FALSE(a.failed(SdpaFailure::kRefused));
  EXPECT_TRUE(a.done());
  EXPECT_EQ(a.verdict(), SdpaVerdict::kRefused);
}

TEST(SdpaPolicy, ForwardStartingWithTheBroadcastFormFallsBackToThePerQueryForm) {
  SdpaBiasAttempts a(/*backward=*/false, SdpaBiasForm::kBroadcast);  // the GPU test's order
  EXPECT_EQ(a.form(), SdpaBiasForm::kBroadcast);
  EXPECT_TRUE(a.failed(SdpaFailure::kRefused));
  EXPECT_EQ(a.form(), SdpaBiasForm::kPerQuery);
  EXPECT_FALSE(a.failed(SdpaFailure::kRefused));
  EXPECT_TRUE(a.done());
}

// cuDNN 9.19 ran a backward with the broadcast bias and returned wrong
// gradients (sdpa_policy.h): a backward key never declares it, whatever the
// first forward form is, and a refused per-query form is the key's verdict.
TEST(SdpaPolicy, BackwardDeclaresOnlyThePerQueryForm) {
  for (SdpaBiasForm first : {SdpaBiasForm::kPerQuery, SdpaBiasForm::kBroadcast}) {
    SdpaBiasAttempts a(/*backward=*/true, first);
    EXPECT_EQ(a.form(), SdpaBiasForm::kPerQuery);
    EXPECT_FALSE(a.failed(SdpaFailure::kRefused));
    EXPECT_TRUE(a.done());
    EXPECT_EQ(a.verdict(), SdpaVerdict::kRefused);
  }
  SdpaBiasAttempts plan(/*backward=*/true);
  EXPECT_FALSE(plan.failed(SdpaFailure::kPlanFailed));
  EXPECT_EQ(plan.verdict(), SdpaVerdict::kPlanFailed);
}

TEST(SdpaPolicy, APlanFailureOnEitherFormIsTheVerdict) {
  SdpaBiasAttempts first_failed(/*backward=*/false);
  EXPECT_TRUE(first_failed.failed(SdpaFailure::kPlanFailed));  // a plan failure still tries the other form
  EXPECT_FALSE(first_failed.failed(SdpaFailure::kRefused));
  EXPECT_EQ(first_failed.verdict(), SdpaVerdict::kPlanFailed);
  SdpaBiasAttempts second_failed(/*backward=*/false);
  EXPECT_TRUE(second_failed.failed(SdpaFailure::kRefused));
  EXPECT_FALSE(second_failed.failed(SdpaFailure::kPlanFailed));
  EXPECT_EQ(second_failed.verdict(), SdpaVerdict::kPlanFailed);
}

TEST(SdpaPolicy, BuildStepFailuresAreRefusalsPlanFailuresOrErrors) {
  using S = SdpaBuildStep;
  using F = SdpaFailure;
  // "Not supported" before the plans: a refusal; any other code there is a bug.
  for (S s : {S::kValidate, S::kBuildOperationGraph}) {
    EXPECT_EQ(classify_sdpa_failure(s, true, false), F::kRefused) << sdpa_step_name(s);
    EXPECT_EQ(classify_sdpa_failure(s, false, false), F::kError) << sdpa_step_name(s);
    EXPECT_EQ(classify_sdpa_failure(s, false, true), F::kError) << sdpa_step_name(s);
  }
  EXPECT_EQ(classify_sdpa_failure(S::kCreateExecutionPlans, true, false), F::kRefused);
  EXPECT_EQ(classify_sdpa_failure(S::kCreateExecutionPlans, false, true), F::kRefused);
  EXPECT_EQ(classify_sdpa_failure(S::kCreateExecutionPlans, false, false), F::kError);
  EXPECT_EQ(classify_sdpa_failure(S::kCheckSupport, false, false), F::kRefused);
  // Issue 30 item 4: build_plans (NVRTC, plan creation) runs the kernel, whatever the code.
  EXPECT_EQ(classify_sdpa_failure(S::kBuildPlans, false, false), F::kPlanFailed);
  EXPECT_EQ(classify_sdpa_failure(S::kBuildPlans, true, false), F::kPlanFailed);
  EXPECT_EQ(classify_sdpa_failure(S::kWorkspaceSize, false, false), F::kError);
}

TEST(SdpaPolicy, LabelsSayWhichFormRanAndWhyTheKernelRan) {
  const std::string broadcast = sdpa_impl_label(SdpaBiasForm::kBroadcast);
  const std::string per_query = sdpa_impl_label(SdpaBiasForm::kPerQuery);
  EXPECT_EQ(broadcast, "cudnn_sdpa");  // the label results before issue 30 carry
  EXPECT_NE(per_query, broadcast);
  EXPECT_EQ(per_query.rfind("cudnn_sdpa", 0), 0u);
  const std::string plan = sdpa_fallback_label(SdpaVerdict::kPlanFailed);
  const std::string handle = sdpa_fallback_label(SdpaVerdict::kNoHandle);
  EXPECT_NE(plan, handle);
  for (const std::string& l : {plan, handle}) {
    EXPECT_EQ(l.rfind("cuda_kernel", 0), 0u) << l;  // the runner's note on kernel cells finds them
    EXPECT_NE(l, "cuda_kernel") << "a cuDNN failure must not look like a refused shape";
  }
  EXPECT_EQ(sdpa_fallback_label(SdpaVerdict::kRefused), nullptr);  // the device counts "cuda_kernel"
  EXPECT_EQ(sdpa_fallback_label(SdpaVerdict::kRuns), nullptr);
}

// ---- the process-wide cache -------------------------------------------------------------

// What the fakes did, in order: "make 0", "plan 0:12 destroyed", "handle 0 destroyed".
std::vector<std::string> g_log;

class FakeHandle {
 public:
  FakeHandle() = default;
  explicit FakeHandle(int ordinal) : ordinal_(ordinal) {}
  FakeHandle(FakeHandle&& o) noexcept : ordinal_(o.ordinal_) { o.ordinal_ = -1; }
  FakeHandle& operator=(FakeHandle&& o) noexcept {
    if (this != &o) {
      reset();
      ordinal_ = o.ordinal_;
      o.ordinal_ = -1;
    }
    return *this;
  }
  ~FakeHandle() { reset(); }
  explicit operator bool() const { return ordinal_ >= 0; }

 private:
  void reset() {
    if (ordinal_ >= 0) g_log.push_back("handle " + std::to_string(ordinal_) + " destroyed");
    ordinal_ = -1;
  }
  int ordinal_ = -1;
};

struct FakePlan {
  std::string name;
  FakePlan() = default;
  explicit FakePlan(std::string n) : name(std::move(n)) {}
  FakePlan(FakePlan&& o) noexcept : name(std::move(o.name)) { o.name.clear(); }
  FakePlan& operator=(FakePlan&& o) noexcept {
    name = std::move(o.name);
    o.name.clear();
    return *this;
  }
  ~FakePlan() {
    if (!name.empty()) g_log.push_back("plan " + name + " destroyed");
  }
};

using Cache = OrdinalPlanCache<FakeHandle, int, FakePlan, std::hash<int>>;

// A device's use of the cache, as CudnnSdpa's: the ordinal's context (the
// handle made on first use), then the key's plan, built on a miss.
struct FakeDevice {
  Cache& cache;
  int ordinal;
  bool handle_fails = false;
  int builds = 0, handle_makes = 0, failures_printed = 0;

  FakePlan* plan(int key) {
    bool first = false;
    Cache::Context& c = cache.context(
        ordinal,
        [&](std::string* why) {
          ++handle_makes;
          g_log.push_back("make " + std::to_string(ordinal));
          if (handle_fails) {
            *why = "libcudnn_engines_precompiled.so.9: cannot open shared object file";
            return FakeHandle{};
          }
          return FakeHandle{ordinal};
        },
        &first);
    if (!c.handle) {
      if (first) ++failures_printed;
      return nullptr;
    }
    if (FakePlan* p = Cache::find(c, key)) return p;
    ++builds;
    return &Cache::insert(c, key, FakePlan(std::to_string(ordinal) + ":" + std::to_string(key)));
  }
};

TEST(OrdinalPlanCache, ASecondDeviceOfTheOrdinalReusesThePlansAndTheHandle) {
  g_log.clear();
  Cache cache;
  FakePlan* built = nullptr;
  {
    FakeDevice repeat1{cache, 0};
    built = repeat1.plan(12);
    EXPECT_EQ(repeat1.plan(12), built);  // a hit within one device
    EXPECT_EQ(repeat1.builds, 1);
    EXPECT_EQ(repeat1.handle_makes, 1);
  }
  FakeDevice repeat2{cache, 0};  // the next repeat's device
  EXPECT_EQ(repeat2.plan(12), built);
  EXPECT_EQ(repeat2.builds, 0) << "the second device rebuilt a plan of the same shape";
  EXPECT_EQ(repeat2.handle_makes, 0) << "the second device made another handle";
  EXPECT_NE(repeat2.plan(13), built);  // another shape: a miss
  EXPECT_EQ(repeat2.builds, 1);
  FakeDevice other_gpu{cache, 1};
  EXPECT_NE(other_gpu.plan(12), built);  // another ordinal: its own handle and plans
  EXPECT_EQ(other_gpu.builds, 1);
  EXPECT_EQ(other_gpu.handle_makes, 1);
  EXPECT_EQ(cache.plans(), 3u);
}

TEST(OrdinalPlanCache, AFailedHandleIsKeptAndReportedOnce) {
  g_log.clear();
  Cache cache;
  FakeDevice repeat1{cache, 0};
  repeat1.handle_fails = true;
  EXPECT_EQ(repeat1.plan(12), nullptr);
  EXPECT_EQ(repeat1.plan(12), nullptr);
  FakeDevice repeat2{cache, 0};
  repeat2.handle_fails = true;
  EXPECT_EQ(repeat2.plan(12), nullptr);
  EXPECT_EQ(repeat1.handle_makes + repeat2.handle_makes, 1) << "a failed handle was tried again";
  EXPECT_EQ(repeat1.failures_printed + repeat2.failures_printed, 1);
  bool first = true;
  const Cache::Context& c = cache.context(0, [](std::string*) { return FakeHandle{0}; }, &first);
  EXPECT_FALSE(first);
  EXPECT_FALSE(c.handle);
  EXPECT_NE(c.failure.find("libcudnn_engines_precompiled"), std::string::npos) << c.failure;
  // A make that fails without a reason still leaves one to print.
  const Cache::Context& silent = cache.context(3, [](std::string*) { return FakeHandle{}; });
  EXPECT_FALSE(silent.failure.empty());
}

TEST(OrdinalPlanCache, PlansAreDestroyedBeforeTheirHandle) {
  g_log.clear();
  {
    Cache cache;
    FakeDevice gpu0{cache, 0}, gpu1{cache, 1};
    gpu0.plan(1), gpu0.plan(2), gpu1.plan(1);
    g_log.clear();
  }  // the destructor: what process exit runs for the static cache
  ASSERT_EQ(g_log.size(), 5u);
  const std::vector<std::string> ordinal0(g_log.begin(), g_log.begin() + 3);
  EXPECT_EQ(std::set<std::string>(ordinal0.begin(), ordinal0.begin() + 2),
            (std::set<std::string>{"plan 0:1 destroyed", "plan 0:2 destroyed"}));
  EXPECT_EQ(ordinal0[2], "handle 0 destroyed");
  EXPECT_EQ(g_log[3], "plan 1:1 destroyed");
  EXPECT_EQ(g_log[4], "handle 1 destroyed");
}

}  // namespace
}  // namespace mpb::cuda
