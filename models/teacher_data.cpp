#include "models/teacher_data.h"

#include <cmath>

#include "core/rng.h"

namespace mpb {

namespace {
constexpr uint64_t kTeacherStream = 1, kTrainStream = 2, kEvalStream = 3;
}

TeacherData::TeacherData(uint64_t seed, int input_dim, int classes, int teacher_hidden)
    : seed_(seed), input_dim_(input_dim), classes_(classes), hidden_(teacher_hidden) {
  // The teacher (the task itself) comes from a constant seed, so every
  // repeat and every cell learns the same function; only the training
  // samples and the initial weights follow the run's seed.
  Rng rng(Rng::stream_seed(0x7EAC4E5ull, kTeacherStream));
  w1_.resize(static_cast<size_t>(hidden_) * input_dim_);
  w2_.resize(static_cast<size_t>(classes_) * hidden_);
  for (float& w : w1_) w = static_cast<float>(rng.normal());
  for (float& w : w2_) w = static_cast<float>(rng.normal());
}

int TeacherData::label(const float* x) const {
  std::vector<double> h(static_cast<size_t>(hidden_));
  const double in_scale = 1.0 / std::sqrt(static_cast<double>(input_dim_));
  for (int j = 0; j < hidden_; ++j) {
    double s = 0.0;
    for (int i = 0; i < input_dim_; ++i) s += w1_[static_cast<size_t>(j) * input_dim_ + i] * x[i];
    h[static_cast<size_t>(j)] = std::tanh(s * in_scale);
  }
  int best = 0;
  double best_v = -1e300;
  for (int c = 0; c < classes_; ++c) {
    double s = 0.0;
    for (int j = 0; j < hidden_; ++j) s += w2_[static_cast<size_t>(c) * hidden_ + j] * h[static_cast<size_t>(j)];
    if (s > best_v) best_v = s, best = c;
  }
  return best;
}

HostBatch TeacherData::make(uint64_t stream, int64_t size) const {
  HostBatch b;
  b.size = size;
  b.row_width = input_dim_;
  b.x.resize(static_cast<size_t>(size) * input_dim_);
  b.y.resize(static_cast<size_t>(size));
  Rng rng(stream);
  for (float& v : b.x) v = static_cast<float>(rng.normal());
  for (int64_t s = 0; s < size; ++s) b.y[static_cast<size_t>(s)] = label(&b.x[static_cast<size_t>(s) * input_dim_]);
  return b;
}

HostBatch TeacherData::train_batch(int64_t step, int64_t size) const {
  return make(Rng::stream_seed(Rng::stream_seed(seed_, kTrainStream), static_cast<uint64_t>(step)), size);
}

HostBatch TeacherData::eval_batch(int64_t offset, int64_t size) const {
  // Eval samples are generated one by one from their index, so any chunking
  // of the eval set yields the same samples. Independent of the run seed.
  HostBatch b;
  b.size = size;
  b.row_width = input_dim_;
  for (int64_t s = 0; s < size; ++s) {
    HostBatch one = make(Rng::stream_seed(Rng::stream_seed(0xE7A1ull, kEvalStream), static_cast<uint64_t>(offset + s)), 1);
    b.x.insert(b.x.end(), one.x.begin(), one.x.end());
    b.y.push_back(one.y[0]);
  }
  return b;
}

// Mirrors the constructor (w1_, w2_) and make(): keep them together.
MemoryEstimate estimate_teacher_data_memory(int input_dim, int classes, int teacher_hidden, double batch,
                                            double micro) {
  MemoryEstimate e;
  const double I = input_dim, H = teacher_hidden;
  e.host = (H * I + double(classes) * H) * 4;  // w1_, w2_
  e.host += batch * (I * 4 + 4 + I * 2);        // x, y, the 16-bit staging
  e.host += micro * (I * 4 + 4);                // an evaluation chunk
  return e;
}

}  // namespace mpb
