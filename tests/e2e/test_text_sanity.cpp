// Issue 31's sanity bar: BERT-mini on the Python docs' prose (SentencePiece
// subwords), set up as experiments/convergence.yaml's baseline cell (its
// model, corpus, tokenizer, batch, loss weight and AdamW), trained for kSteps
// at learning rate kLr with the cell's first seed, must predict held-out
// masked tokens better than any model that ignores the context can. That
// bound is computed here, independently of the trainer: the corpus split and
// tokenized again, the held-out tokens counted, and the best context-free
// prediction (the held-out set's own unigram distribution, which no model
// trained on the training split can beat without using the context) scored
// on exactly the masked tokens the trainer evaluates. Same tokens on both
// sides, so which tokens were drawn cancels out of the comparison.
//
// Why not the experiment's own 40 steps at lr 1e-3: measured (2026-11-27, 2
// "AMD EPYC" cores, avx512_bf16), BERT-mini sits on the unigram plateau at
// lr 1e-3 (5.80 vs 5.78 nats after 1,200 steps of batch 8) and at 2e-3 with
// batch 64 (5.78 after 600). PyTorch's BERT (bench/torch_bert_model.py) on
// the same tokens and masking sat there too (lr 2e-3, batch 64: 5.797 after
// 600 steps) and left it at lr 5e-4 (5.460 after 200), so the plateau came
// from the learning rate, not from mpbench. Pre-LN did not help (5.79-5.81
// after 600 steps at lr 5e-4 to 2e-3). At lr 3e-4 (the best of 1e-4 to 1e-3
// at batch 8) the held-out loss leaves the plateau slowly: 0.08 nats below
// the context-free bound after 500 steps (256 eval samples), 0.19 after
// 1,000 (512 samples; 48 s on 2 idle cores). 500 steps in all 35 runs of experiments/convergence.yaml
// took 16.4 min, over its 15-minute budget, which is why the experiment
// compares precisions on the early stretch and this test checks the bar.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>

#include "backends/cpu/cpu_device.h"
#include "models/mlm_data.h"
#include "models/subword_tokenizer.h"
#include "models/text_corpus.h"
#include "runner/experiment/config.h"
#include "train/cell_factory.h"
#include "train/trainer.h"

namespace mpb {
namespace {

const std::string kExperiment = std::string(MPB_SOURCE_DIR) + "/experiments/convergence.yaml";

// The paired comparison leaves one source of noise: whether the model's
// advantage on these ~2,200 masked tokens (kEvalSamples x 30 x 0.15) holds
// on others. The context-free loss per token spreads by about 2 nats (the
// test prints its standard error, 0.034); the paired difference should
// spread less, as both losses are high on the same rare tokens (assumed, not
// measured). 0.1 nats is then about three standard errors; the measured gap
// is 0.187.
constexpr double kMargin = 0.1;
constexpr int kEvalSamples = 512;
constexpr int kSteps = 1000;
constexpr double kLr = 3e-4;

const Cell& baseline_of(const ExperimentConfig& e) {
  for (const Cell& c : e.cells)
    if (c.is_baseline) return c;
  throw std::runtime_error(kExperiment + " has no baseline cell");
}

TEST(TextSanity, ConvergenceBaselineBeatsTheBestContextFreeLossOnHeldOutTokens) {
  // A private tokenizer cache: the test proves the path from text to loss,
  // whatever another run left in the user's cache (training it takes ~5 s).
  const std::string cache = ::testing::TempDir() + "mpb_text_sanity_" + std::to_string(::getpid());
  const char* saved = std::getenv("XDG_CACHE_HOME");
  const std::string saved_value = saved ? saved : "";
  ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);

  // Loading checks data.path: a missing corpus fails here, naming
  // scripts/install_deps.sh --corpus (scripts/test.sh runs it with --tests).
  const ExperimentConfig e = load_experiment(kExperiment);
  CellConfig c = baseline_of(e).config;
  ASSERT_EQ(c.data.kind, DataKind::Text);
  c.steps = kSteps;
  c.optimizer.lr = kLr;
  c.eval_every = kSteps;  // one evaluation, at the end
  c.data.eval_samples = kEvalSamples;
  const uint64_t seed = c.seed;  // repeat 0's, as the runner seeds it
  auto dev = make_cpu_device();
  auto model = build_model(*dev, c, seed);
  auto data = build_dataset(c, seed);
  const RunRecord r = train(*dev, *model, *data, c);
  ASSERT_FALSE(r.evals.empty());
  ASSERT_EQ(r.evals.back().step, c.steps);
  const double held_out_loss = r.evals.back().loss;

  // The held-out tokens' unigram distribution, from the text itself.
  std::ifstream in(c.data.path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const TextSplit split = split_documents(text, size_t(c.model.seq_len - 2));
  const SubwordTokenizer sp = SubwordTokenizer::train_or_load(split.train, c.data.vocab - 4, cache + "/mpbench/tokenizers");
  EXPECT_TRUE(sp.from_cache());  // the one the cell trained
  std::map<int32_t, int64_t> counts;
  int64_t n = 0;
  for (const std::string& doc : split.held_out)
    for (const int32_t id : sp.encode(doc)) ++counts[id + 4], ++n;  // + 4: the dataset's ids follow the specials
  double entropy = 0.0;
  for (const auto& [id, k] : counts) entropy -= double(k) / double(n) * std::log(double(k) / double(n));

  // That distribution's loss on the very labels the evaluation scored.
  const HostBatch eval = data->eval_batch(0, c.data.eval_samples);
  double context_free = 0.0, squares = 0.0;
  int64_t labels = 0;
  for (const int32_t y : eval.y) {
    if (y < 0) continue;
    const auto it = counts.find(y);
    ASSERT_NE(it, counts.end()) << "label " << y << " is no held-out token";
    const double loss = -std::log(double(it->second) / double(n));
    context_free += loss, squares += loss * loss;
    ++labels;
  }
  ASSERT_GT(labels, 1);
  context_free /= double(labels);
  // The runner records the same bound in each text cell's JSON (data.context_free_loss).
  const auto* mlm = dynamic_cast<const MlmData*>(data.get());
  ASSERT_NE(mlm, nullptr);
  const std::optional<ContextFreeLoss> recorded = mlm->context_free_loss(c.data.eval_samples);
  ASSERT_TRUE(recorded.has_value());
  EXPECT_EQ(recorded->labels, labels);
  EXPECT_NEAR(recorded->loss, context_free, 1e-12 * context_free);
  const double sd = std::sqrt((squares - double(labels) * context_free * context_free) / double(labels - 1));

  std::printf("%s, baseline %s, %d steps of batch %d at lr %g, seed %llu: held-out MLM loss %.3f nats; the best "
              "context-free loss on the same %lld masked tokens %.3f (standard error %.3f; the unigram entropy of "
              "all %lld held-out tokens %.3f): below it by %.3f nats (%.1f%%)\n",
              kExperiment.c_str(), baseline_of(e).id.c_str(), c.steps, c.batch_size, c.optimizer.lr,
              static_cast<unsigned long long>(seed), held_out_loss, static_cast<long long>(labels), context_free,
              sd / std::sqrt(double(labels)), static_cast<long long>(n), entropy, context_free - held_out_loss,
              100.0 * (context_free - held_out_loss) / context_free);
  EXPECT_LT(held_out_loss, context_free - kMargin);
  std::filesystem::remove_all(cache);
  if (saved) ::setenv("XDG_CACHE_HOME", saved_value.c_str(), 1);
  else ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace mpb
