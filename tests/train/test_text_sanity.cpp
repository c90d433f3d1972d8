// The sanity bar of issue 31: BERT-mini trained briefly on the real English
// corpus (scripts/install_deps.sh extracts python3-doc's prose to
// /usr/local/share/mpbench/python-docs.txt; MPB_TEXT_CORPUS names another)
// with SentencePiece subwords must predict held-out masked tokens better than
// the unigram entropy of those very tokens: the loss of the best model that
// ignores context. The entropy is computed here, independently of the
// trainer: the corpus split and tokenized again, the held-out tokens counted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "backends/cpu/cpu_device.h"
#include "models/subword_tokenizer.h"
#include "models/text_corpus.h"
#include "train/cell_factory.h"
#include "train/trainer.h"

namespace mpb {
namespace {

std::string corpus_path() {
  if (const char* p = std::getenv("MPB_TEXT_CORPUS"); p && *p) return p;
  return "/usr/local/share/mpbench/python-docs.txt";
}

// DISABLED: the bar (held-out loss at least kMargin = 0.3 nats below the
// unigram entropy, in about 60 s of CPU) is not met. Every setting tried
// stalls near the unigram plateau within that budget. Measured on 2 shared
// cores ("AMD EPYC"; wall times inflated by other people's builds and tests
// running at the same time), AdamW, T 32 unless said, held-out loss vs
// entropy (below it by):
//   40 steps, batch 16, 1,024 pieces, lr 3e-3, warm-up 5: 5.898 vs 5.783 (-0.115), 250 s
//   60 steps, batch 16, T 64, 2,000 pieces, lr 2e-3, warm-up 5: 6.371 vs 6.173 (-0.199), 53 s
//   80 steps, batch 32, 252 pieces, lr 2e-3, warm-up 10: 4.881 vs 4.766 (-0.115), 108 s
//   150 steps, batch 32, 1,024 pieces, lr 1e-3, warm-up 10: 5.744 vs 5.783 (0.039), 126 s
//   250 steps, batch 16, 1,024 pieces, lr 5e-3, warm-up 25: 5.724 vs 5.783 (0.059), 185 s
//   400 steps, batch 8, 1,024 pieces, lr 1e-3, warm-up 20: 5.729 vs 5.783 (0.054), 113 s; again
//     224 s, bit for bit the same loss, under a load of 5 (the settings below)
// The 0.04-0.06 margins are within the held-out loss's own noise: 128
// samples hold about 550 masked tokens, whose per-token loss spreads by a
// few nats, so the mean's standard error is near 0.1 nats (an estimate,
// not measured). A 2,000-piece vocabulary did not reach the bar sooner (its
// entropy is higher too), nor did 252 pieces in 80 steps.
// Longer runs through the runner with 512 eval samples (2026-11-27, the same
// corpus and 1,024 pieces) show the model sitting on the unigram plateau,
// not slowly below it:
//   1,200 steps, batch 8, lr 1e-3, warm-up 20: 5.894 (step 200), 5.815 (400),
//     5.810 (800), 5.798 (1,200) vs 5.783
//   600 steps, batch 64, lr 2e-3, warm-up 30: 6.385 (100), 5.803 (200),
//     5.796 (400), 5.782 (600) vs 5.783; 365 s on 2 idle cores
// So leaving the plateau (using the context) needs more tokens than a CI
// test or experiments/convergence.yaml (40 steps of batch 8) can afford on
// two cores; that experiment compares precisions on this early stretch.
// Run it with --gtest_also_run_disabled_tests.
TEST(TextSanity, DISABLED_BertMiniBeatsTheUnigramEntropyOfHeldOutTokens) {
  const std::string path = corpus_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing: run scripts/install_deps.sh";
  // A private cache: the test trains its tokenizer (about 5 s) and proves the
  // path from text to loss, whatever another run left in the user's cache.
  const std::string cache = ::testing::TempDir() + "mpb_text_sanity_" + std::to_string(::getpid());
  const char* saved = std::getenv("XDG_CACHE_HOME");
  const std::string saved_value = saved ? saved : "";
  ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);

  CellConfig c;
  c.model.kind = ModelKind::Bert;
  c.model.size = "mini";  // 4 layers, hidden 256, 4 heads
  c.model.seq_len = 32;
  c.data.kind = DataKind::Text;
  c.data.path = path;
  c.data.tokenizer = TextTokenizerKind::SentencePiece;
  c.data.vocab = 1028;  // 1024 pieces + 4 specials
  c.data.eval_samples = 128;
  c.batch_size = 8;
  c.steps = 400;
  c.warmup_steps = 0;
  c.numerics_every = 0;
  c.optimizer.kind = OptimizerKind::AdamW;
  c.optimizer.lr = 1e-3;  // AdamW's best at small batches (docs/CONFIG.md, large_batch); 3e-3 stalls there
  c.optimizer.warmup = 20;
  auto dev = make_cpu_device();
  auto model = build_model(*dev, c, 1);
  auto data = build_dataset(c, 1);
  const RunRecord r = train(*dev, *model, *data, c);
  ASSERT_FALSE(r.evals.empty());
  const double held_out_loss = r.evals.back().loss;

  // The unigram entropy of the held-out tokens, from the text itself.
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const TextSplit split = split_documents(text, size_t(c.model.seq_len - 2));
  const SubwordTokenizer sp = SubwordTokenizer::train_or_load(split.train, c.data.vocab - 4, cache + "/mpbench/tokenizers");
  EXPECT_TRUE(sp.from_cache());  // the one the cell trained
  std::map<int32_t, int64_t> counts;
  int64_t n = 0;
  for (const std::string& doc : split.held_out)
    for (const int32_t id : sp.encode(doc)) ++counts[id], ++n;
  double entropy = 0.0;
  for (const auto& [id, k] : counts) entropy -= double(k) / double(n) * std::log(double(k) / double(n));

  std::printf("held-out MLM loss %.3f nats after %d steps; unigram entropy of the %lld held-out tokens %.3f nats; "
              "below it by %.3f nats (%.1f%%)\n",
              held_out_loss, c.steps, static_cast<long long>(n), entropy, entropy - held_out_loss,
              100.0 * (entropy - held_out_loss) / entropy);
  // "Clearly" below: a margin of three standard errors of the held-out loss (above).
  constexpr double kMargin = 0.3;
  EXPECT_LT(held_out_loss, entropy - kMargin);
  std::filesystem::remove_all(cache);
  if (saved) ::setenv("XDG_CACHE_HOME", saved_value.c_str(), 1);
  else ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace mpb
