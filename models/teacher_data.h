// A deterministic, learnable classification task: Gaussian inputs labelled by
// a fixed random teacher network, label = argmax(W2 tanh(W1 x / sqrt(d))).
// Each optimizer step's batch is drawn fresh from (run seed, step), so a run
// is reproducible on any machine, and micro-batches (gradient accumulation)
// are row slices of the same batch. The held-out set comes from its own
// stream, independent of the run seed.
#pragma once

#include <cstdint>
#include <vector>

#include "models/dataset.h"
#include "models/memory_estimate.h"

namespace mpb {

class TeacherData final : public Dataset {
 public:
  TeacherData(uint64_t seed, int input_dim, int classes, int teacher_hidden);
  HostBatch train_batch(int64_t step, int64_t size) const override;
  HostBatch eval_batch(int64_t offset, int64_t size) const override;
  int row_width() const override { return input_dim_; }
  int labels_per_sample() const override { return 1; }
  int classes() const { return classes_; }

 private:
  HostBatch make(uint64_t stream, int64_t size) const;
  int label(const float* x) const;

  uint64_t seed_;
  int input_dim_, classes_, hidden_;
  std::vector<float> w1_, w2_;  // [hidden, input_dim], [classes, hidden]
};

// Host memory of a TeacherData and of the batches drawn from it: the teacher's
// weights, one training batch of `batch` samples (features, labels, and the
// trainer's 16-bit copy of the features), one evaluation chunk of `micro`.
MemoryEstimate estimate_teacher_data_memory(int input_dim, int classes, int teacher_hidden, double batch,
                                            double micro);

}  // namespace mpb
