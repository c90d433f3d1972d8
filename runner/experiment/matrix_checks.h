// Checks on an experiment's matrix that catch a rule that does not do what its author
// meant, before any cell runs (issue 41, "config footguns"): on a GPU matrix a wrong
// cell costs hours. Each throws a ConfigError pointing at the file, line and column.
#pragma once

#include <string>
#include <vector>

#include "runner/experiment/matrix.h"

namespace mpb {

// A bare 16-bit dtype ("bf16", "fp16", "half", ...: pure 16-bit parameters, no fp32
// master weights) in a precision axis that also holds an autocast mode (amp_bf16,
// amp_fp16, O1, fp8): almost always a slip for amp_bf16/amp_fp16. `precision: [fp32,
// bf16, amp_fp16]` was accepted, and an exclude written for amp_bf16 then silently
// matched nothing. Pure 16-bit beside autocast stays possible, spelt as a policy string
// (params=bfloat16,compute=bfloat16).
void check_precision_axis(const std::string& file, const Axis& axis);

// The exclude entries that match no cell of the matrix's product: the first of them is
// an error naming the entry and, for each of its keys, the values the matrix gives that
// key where the entry's value is not one of them.
void check_excludes_match(const std::string& file, const std::vector<Pattern>& excludes,
                          const std::vector<Where>& excludes_at, const std::vector<Cell>& product);

}  // namespace mpb
