"""Comparisons of result sets: gate (compare.py BASE NEW), generations (compare.py --generations),
ab (ab_compare.py: two runner builds in interleaved rounds)."""
