// The no-decay range helpers of ops/optimizer.h that the CUDA optimizer
// kernels use (scalar::in_sorted_ranges per element, scalar::decay_pieces per
// launch), checked on the host where no GPU runs them: the per-element test
// against a linear scan, and the pieces against the contract the kernels rely
// on (every element in exactly one piece, every range inside its piece, at
// most kRangesPerPiece ranges each).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/rng.h"
#include "ops/optimizer.h"

namespace mpb {
namespace {

std::vector<ElementRange> random_ranges(Rng& rng, long long n, int count) {
  std::vector<ElementRange> out;
  long long at = 0;
  for (int k = 0; k < count && at < n; ++k) {
    const long long begin = at + static_cast<long long>(rng.uniform() * 5);  // gaps of 0..4 (0: adjacent)
    const long long end = std::min(n, begin + 1 + static_cast<long long>(rng.uniform() * 6));
    if (begin >= end) break;
    out.push_back({begin, end});
    at = end;
  }
  return out;
}

bool linear_in(long long i, const std::vector<ElementRange>& ranges) {
  for (const ElementRange& r : ranges)
    if (i >= r.begin && i < r.end) return true;
  return false;
}

TEST(DecayRanges, InSortedRangesAgreesWithALinearScan) {
  Rng rng(5);
  for (int count : {0, 1, 2, 7, 32}) {
    const long long n = 400;
    const auto ranges = random_ranges(rng, n, count);
    std::vector<long long> begin, end;
    for (const auto& r : ranges) begin.push_back(r.begin), end.push_back(r.end);
    for (long long i = -1; i <= n; ++i)
      ASSERT_EQ(scalar::in_sorted_ranges(i, begin.data(), end.data(), int(ranges.size())), linear_in(i, ranges))
          << "element " << i << ", " << ranges.size() << " ranges";
  }
}

TEST(DecayRanges, PiecesCoverEveryElementOnceWithTheirRangesInside) {
  Rng rng(9);
  for (int count : {0, 1, 31, 32, 33, 64, 65, 200}) {
    const long long n = 3000;
    const auto ranges = random_ranges(rng, n, count);
    const auto pieces = scalar::decay_pieces(n, ranges);
    ASSERT_FALSE(pieces.empty());
    EXPECT_EQ(pieces.front().lo, 0);
    EXPECT_EQ(pieces.back().hi, n);
    size_t seen = 0;
    for (size_t p = 0; p < pieces.size(); ++p) {
      const auto& piece = pieces[p];
      EXPECT_LT(piece.lo, piece.hi) << "an empty piece";
      if (p > 0) {
        EXPECT_EQ(piece.lo, pieces[p - 1].hi);
      }
      ASSERT_LE(piece.count, scalar::kRangesPerPiece);
      for (int k = 0; k < piece.count; ++k, ++seen) {
        EXPECT_EQ(piece.begin[k], ranges[seen].begin);
        EXPECT_EQ(piece.end[k], ranges[seen].end);
        EXPECT_GE(piece.begin[k], piece.lo);
        EXPECT_LE(piece.end[k], piece.hi);
      }
      // What a kernel over this piece decides per element equals the whole list's answer.
      for (long long i = piece.lo; i < piece.hi; ++i)
        ASSERT_EQ(scalar::in_sorted_ranges(i, piece.begin, piece.end, piece.count), linear_in(i, ranges)) << i;
    }
    EXPECT_EQ(seen, ranges.size());
  }
}

}  // namespace
}  // namespace mpb
