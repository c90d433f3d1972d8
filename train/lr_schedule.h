// The learning rate of optimizer step t (1-based): linear warm-up from 0 over
// `warmup` steps (BERT's recipe), then constant or decaying to 0 at `steps`
// (linear as in BERT, or cosine). Counted in applied steps, so a skipped
// (non-finite) step does not advance the schedule, as with GradScaler.
#pragma once

#include "config/cell_config.h"

namespace mpb {

double scheduled_lr(double lr, int warmup, LrDecay decay, long long step, long long steps);

}  // namespace mpb
