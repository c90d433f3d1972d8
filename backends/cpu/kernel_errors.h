// The exceptions the CPU kernels throw, built here, in code compiled for the
// baseline ISA: a kernel source that built a std::string itself would
// instantiate std::string and std::to_string with its own ISA's flags, and the
// linker may keep that AVX-512 copy for every caller in the binary. The kernels
// (backends/cpu/kernels/) call these instead; tests/scripts/test_isa_symbols.py
// checks that no code symbol is shared between two ISA builds.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace mpb::cpu {

// std::out_of_range "<op>: id <id> at position <pos> is outside the table's <rows> rows".
[[noreturn]] void throw_bad_id(const char* op, int64_t id, int64_t pos, int64_t rows);
// std::out_of_range "<op>: label <label> in row <row> is not below the <classes> classes".
[[noreturn]] void throw_bad_label(const char* op, int64_t label, int64_t row, int64_t classes);
// std::out_of_range: more labelled positions than the sparse MLM head's buffer holds.
[[noreturn]] void throw_too_many_labels(int64_t labelled, int64_t capacity);
// std::invalid_argument "expected a float tensor, got <dtype>".
[[noreturn]] void throw_not_float(DType t);

}  // namespace mpb::cpu
