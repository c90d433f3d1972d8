// What a BERT step costs, from its configuration alone (no model built):
// the sparse MLM head's row capacity, and the GEMM FLOPs per sample, model
// and recomputed (declared in models/bert.h). The runner's estimates, MFU and
// memory fit use these; the model uses bert_mlm_rows for its head.
#include "models/bert.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace mpb {

namespace {
// Forward GEMM FLOPs of one encoder layer for one sequence.
double layer_forward_flops(const BertConfig& c) {
  const double T = c.seq_len, C = c.hidden, F = c.ffn_dim();
  return 2 * T * C * 3 * C /*QKV*/ + 2 * T * T * C /*q.k^T*/ + 2 * T * T * C /*p.v*/ + 2 * T * C * C /*output dense*/ +
         2 * 2 * T * C * F /*FFN*/;
}
}  // namespace

double bert_mlm_rows_estimate(const BertConfig& c, double micro) {
  const double N = micro * c.seq_len;
  if (c.mlm_head == MlmHead::Dense) return N;
  const double n = micro * std::max(0, c.seq_len - 2);  // maskable tokens, at most
  const double mu = c.mask_prob * n;
  // P(count >= mu (1 + d)) <= exp(-mu h(d)), h(d) = (1+d) ln(1+d) - d
  // (Chernoff; independent Bernoulli masks with mean <= mu). h increases
  // with d: bisect for the d where mu h(d) reaches ln(1e12).
  const double need = std::log(1e12);
  auto h = [](double d) { return (1 + d) * std::log1p(d) - d; };
  double k = n;
  if (mu > 0 && n > mu && mu * h(n / mu - 1) >= need) {
    double lo = 0, hi = n / mu - 1;
    for (int i = 0; i < 200; ++i) {
      const double mid = 0.5 * (lo + hi);
      (mu * h(mid) >= need ? hi : lo) = mid;
    }
    k = std::ceil(mu * (1 + hi));
  }
  k = std::ceil(k / 8) * 8;
  return std::max(1.0, std::min(k, N));
}

int64_t bert_mlm_rows(const BertConfig& c, int64_t micro) {
  return static_cast<int64_t>(bert_mlm_rows_estimate(c, double(micro)));
}

namespace {
// Rows of one sequence that the MLM head needs: every position (dense), or
// the masked ones, mask_prob x (seq_len - 2) on average (sparse; a little
// fewer with short sequences). The sparse head's capacity rows beyond that
// (bert_mlm_rows) are computed but not needed, so model FLOPs leave them out.
double head_rows_needed(const BertConfig& c) {
  if (c.mlm_head == MlmHead::Dense) return c.seq_len;
  return c.mask_prob * std::max(0, c.seq_len - 2);
}
}  // namespace

// GEMM FLOPs of one sequence, forward (2mnk each) + backward (dX and dW:
// twice that). Model FLOPs: checkpointing's recomputed forward is not
// counted (the MFU convention), so GFLOP/s compare across policies; the MLM
// head counts the rows it needs (head_rows_needed).
double bert_train_flops_per_sample(const BertConfig& c) {
  const double C = c.hidden, V = c.model_vocab(), R = head_rows_needed(c);
  const double head = 2 * R * C * C /*transform*/ + 2 * R * C * V /*tied decoder*/;
  return 3.0 * (c.layers * layer_forward_flops(c) + head);
}

// backward() recomputes the forward of every segment but the last one
// (BertActivations::recompute_from), once.
double bert_recompute_flops_per_sample(const BertConfig& c) {
  const int L = c.layers, seg = bert_checkpoint_segment(c);
  if (seg >= L) return 0.0;
  const int segments = (L + seg - 1) / seg;
  const int last_segment_layers = L - (segments - 1) * seg;
  return double(L - last_segment_layers) * layer_forward_flops(c);
}

}  // namespace mpb
