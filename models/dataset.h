// What the trainer needs from a data source: host batches, drawn
// deterministically from (seed, step), and a fixed held-out set. A batch of
// `size` samples carries either float features (MLP) or token ids (BERT) as
// rows of `row_width` values, and labels_per_sample labels per sample; a
// negative label is ignored (an unmasked token), so losses are normalised by
// the number of real labels.
#pragma once

#include <cstdint>
#include <vector>

namespace mpb {

struct HostBatch {
  int64_t size = 0;             // samples
  int row_width = 0;            // values per sample in x or ids
  int labels_per_sample = 1;
  std::vector<float> x;         // [size, row_width] features, or empty
  std::vector<int32_t> ids;     // [size, row_width] token ids, or empty
  std::vector<int32_t> mask;    // [size, row_width] 1 real token / 0 padding (attention mask), or empty
  std::vector<int32_t> y;       // [size * labels_per_sample]; < 0: ignored

  int64_t label_count() const {  // labels that count towards the loss
    int64_t n = 0;
    for (int32_t v : y) n += v >= 0;
    return n;
  }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // The batch of optimizer step `step`; micro-batches are row slices of it.
  virtual HostBatch train_batch(int64_t step, int64_t size) const = 0;
  // Samples [offset, offset + size) of the held-out set (same on every run).
  virtual HostBatch eval_batch(int64_t offset, int64_t size) const = 0;
  virtual int row_width() const = 0;
  virtual int labels_per_sample() const = 0;
};

}  // namespace mpb
