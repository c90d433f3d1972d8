// See backends/cpu/kernel_errors.h: why these live outside the kernel sources.
#include "backends/cpu/kernel_errors.h"

#include <stdexcept>
#include <string>

namespace mpb::cpu {

void throw_bad_id(const char* op, int64_t id, int64_t pos, int64_t rows) {
  throw std::out_of_range(std::string(op) + ": id " + std::to_string(id) + " at position " + std::to_string(pos) +
                          " is outside the table's " + std::to_string(rows) + " rows");
}

void throw_bad_label(const char* op, int64_t label, int64_t row, int64_t classes) {
  throw std::out_of_range(std::string(op) + ": label " + std::to_string(label) + " in row " + std::to_string(row) +
                          " is not below the " + std::to_string(classes) + " classes");
}

void throw_too_many_labels(int64_t labelled, int64_t capacity) {
  throw std::out_of_range("label_positions: " + std::to_string(labelled) + " labelled positions, but pos holds " +
                          std::to_string(capacity) + " (the sparse MLM head would drop the loss of " +
                          std::to_string(labelled - capacity) + " of them)");
}

void throw_not_float(DType t) {
  throw std::invalid_argument(std::string("expected a float tensor, got ") + dtype_name(t));
}

}  // namespace mpb::cpu
