// The public Device ops of memory and the GEMM: each checks its arguments against the
// contract in core/device.h, once, for every backend, then calls the
// backend's *_impl. A backend never repeats these checks; it checks only its
// own limits (marked "backend limit" where they are). The rules they check
// with: core/device_check_rules.h.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/device_check_rules.h"

namespace mpb {

using namespace device_rules;  // NOLINT(google-build-using-namespace): the checks' own vocabulary

namespace {

// ---- GEMM ------------------------------------------------------------------------------
int64_t batch_span(int64_t batch, int64_t stride, int64_t size) { return (batch - 1) * stride + size; }

DType operand_dtype(GemmCompute c) {
  switch (c) {
    case GemmCompute::F16: return DType::F16;
    case GemmCompute::BF16: return DType::BF16;
    default: return DType::F32;
  }
}

void check_fp8_operand(const char* which, const GemmFp8Operand& f) {
  const char* op = "gemm";
  const std::string name = std::string("fp8_") + which;
  if (f.scale.dtype != DType::F32 || f.scale.numel() != 1 || f.scale.data == nullptr)
    fail(op, name + ".scale must be one float32 on the device, got " + describe(f.scale));
  if (!f.amax.empty() && (f.amax.dtype != DType::F32 || f.amax.numel() != 1))
    fail(op, name + ".amax must be empty or one float32, got " + describe(f.amax));
  if (!f.saturated.empty() && (f.saturated.dtype != DType::F32 || f.saturated.numel() != 1))
    fail(op, name + ".saturated must be empty or one float32, got " + describe(f.saturated));
}

void check_gemm(const GemmArgs& g) {
  const char* op = "gemm";
  if (g.fp8_a.enabled != g.fp8_b.enabled) fail(op, "fp8_a and fp8_b must be enabled together");
  if (g.fp8_a.enabled) {
    // The width/alignment rule of FP8 operands: the caller may give any m,
    // n, k and any C the plain GEMM takes. FP8 tensor cores (cuBLASLt) need
    // k and n multiples of 16 and 16-byte aligned C and pre_act: the CUDA
    // backend pads k for free while quantizing, and pads n by writing the
    // outputs through an [m, n rounded up to 16] scratch that it copies back
    // (backends/cuda/fp8_gemm_layout.h). A caller that wants the GEMM
    // without that copy gives n % 16 == 0 and 16-byte aligned outputs (a
    // vocabulary padded to 16, say); nothing is refused here for it.
    if (g.batch != 1) fail(op, "FP8 operands need batch == 1, got " + num(g.batch));
    check_fp8_operand("a", g.fp8_a);
    check_fp8_operand("b", g.fp8_b);
  }
  if (g.m <= 0 || g.n <= 0 || g.k <= 0)
    fail(op, "m, n, k must be positive, got m=" + num(g.m) + " n=" + num(g.n) + " k=" + num(g.k));
  if (g.batch < 1) fail(op, "batch must be >= 1, got " + num(g.batch));
  const int64_t size_a = g.m * g.k, size_b = g.k * g.n, size_c = g.m * g.n;
  if (g.batch == 1) {
    need_numel(op, "a", g.a, size_a, "m*k");
    need_numel(op, "b", g.b, size_b, "k*n");
    need_numel(op, "c", g.c, size_c, "m*n");
  } else {
    if (g.stride_a < size_a || g.stride_b < size_b || g.stride_c < size_c)
      fail(op, "batch strides must be at least the matrix sizes (no broadcast or overlap), got stride_a=" +
                   num(g.stride_a) + " (m*k=" + num(size_a) + ") stride_b=" + num(g.stride_b) + " (k*n=" +
                   num(size_b) + ") stride_c=" + num(g.stride_c) + " (m*n=" + num(size_c) + ")");
    const std::string span = "(batch-1)*stride + matrix size, batch=" + num(g.batch);
    if (g.a.numel() < batch_span(g.batch, g.stride_a, size_a))
      fail(op, "a " + describe(g.a) + " is smaller than batch x stride: needs " +
                   num(batch_span(g.batch, g.stride_a, size_a)) + " elements " + span);
    if (g.b.numel() < batch_span(g.batch, g.stride_b, size_b))
      fail(op, "b " + describe(g.b) + " is smaller than batch x stride: needs " +
                   num(batch_span(g.batch, g.stride_b, size_b)) + " elements " + span);
    if (g.c.numel() < batch_span(g.batch, g.stride_c, size_c))
      fail(op, "c " + describe(g.c) + " is smaller than batch x stride: needs " +
                   num(batch_span(g.batch, g.stride_c, size_c)) + " elements " + span);
    if (g.epilogue != Epilogue::None) fail(op, "a batched GEMM (batch > 1) allows no epilogue");
    if (!g.pre_act.empty()) fail(op, "a batched GEMM (batch > 1) takes no pre_act");
  }
  if (g.a.dtype != g.b.dtype)
    fail(op, std::string("a and b must have the same dtype, got a ") + dtype_name(g.a.dtype) + ", b " +
                 dtype_name(g.b.dtype));
  const DType operand = operand_dtype(g.compute);
  if (g.a.dtype != operand)
    fail(op, std::string("operand dtype ") + dtype_name(g.a.dtype) + " does not match the compute mode " +
                 gemm_compute_name(g.compute) + " (needs " + dtype_name(operand) + ")");
  if (g.c.dtype != DType::F32 && g.c.dtype != operand)
    fail(op, std::string("c must be float32, or the operands' 16-bit type for fp16/bf16 compute, got ") +
                 dtype_name(g.c.dtype) + " with " + gemm_compute_name(g.compute) + " compute");
  const bool backward = is_backward_epilogue(g.epilogue);
  if (g.epilogue != Epilogue::None && !backward) {
    need_float(op, "bias", g.bias);
    need_numel(op, "bias", g.bias, g.n, "[n] for a bias epilogue");
    if (g.alpha != 1.0f || g.beta != 0.0f)
      fail(op, "epilogues need alpha == 1 and beta == 0, got alpha=" + num(double(g.alpha)) +
                   " beta=" + num(double(g.beta)));
  }
  if (backward) {
    if (g.beta != 0.0f) fail(op, "backward epilogues need beta == 0, got beta=" + num(double(g.beta)));
    if (!g.bias.empty()) fail(op, "backward epilogues (DGelu/DGeluBGrad) take no bias");
    if (g.pre_act.empty()) fail(op, "DGelu/DGeluBGrad need pre_act (the forward pre-activation) [m,n]");
    if (g.pre_act.data == g.c.data) fail(op, "DGelu/DGeluBGrad: pre_act must not alias C");
  }
  if (!g.pre_act.empty()) {
    need_float(op, "pre_act", g.pre_act);
    need_numel(op, "pre_act", g.pre_act, size_c, "[m,n]");
    if (g.pre_act.data == g.c.data && g.pre_act.dtype != g.c.dtype)
      fail(op, "pre_act aliasing C must have C's dtype " + std::string(dtype_name(g.c.dtype)) + ", got " +
                   dtype_name(g.pre_act.dtype));
  }
  if (g.epilogue == Epilogue::DGeluBGrad) {
    need_float(op, "bias_grad_out", g.bias_grad_out);
    need_numel(op, "bias_grad_out", g.bias_grad_out, g.n, "[n]");
  } else if (!g.bias_grad_out.empty()) {
    fail(op, "bias_grad_out is only written by Epilogue::DGeluBGrad");
  }
  need_data(op, "a", g.a);
  need_data(op, "b", g.b);
  need_data(op, "c", g.c);
  const std::pair<const char*, const Tensor*> all[] = {{"a", &g.a},       {"b", &g.b},
                                                        {"c", &g.c},       {"bias", &g.bias},
                                                        {"pre_act", &g.pre_act}, {"bias_grad_out", &g.bias_grad_out}};
  for (const auto& [name, t] : all)
    if (reinterpret_cast<uintptr_t>(t->data) % dtype_size(t->dtype) != 0)
      fail(op, std::string(name) + " " + describe(*t) + " is not aligned to its element size");
}

}  // namespace

// ---- memory ------------------------------------------------------------------------------
void Device::upload(const Tensor& dst, const void* host_src) {
  if (dst.bytes() > 0 && host_src == nullptr) fail("upload", "host_src is null");
  need_data("upload", "dst", dst);
  upload_impl(dst, host_src);
}

void Device::download(void* host_dst, const Tensor& src) {
  if (src.bytes() > 0 && host_dst == nullptr) fail("download", "host_dst is null");
  need_data("download", "src", src);
  note_host_sync();
  download_impl(host_dst, src);
}

void Device::copy(const Tensor& dst, const Tensor& src) {
  if (dst.dtype != src.dtype || dst.numel() != src.numel())
    fail("copy", "dtype and size must match, got dst " + describe(dst) + ", src " + describe(src));
  need_data("copy", "dst", dst);
  need_data("copy", "src", src);
  copy_impl(dst, src);
}

// ---- GEMM --------------------------------------------------------------------------------
void Device::gemm(const GemmArgs& args) {
  check_gemm(args);
  if (args.fp8_a.enabled) {
    const Support fp8 = supports(Feature::GemmFp8);
    if (!fp8.runs()) throw DeviceError("gemm: FP8 operands: " + fp8.describe());
  }
  if (!supports(gemm_feature(args.compute)).runs())
    throw DeviceError(std::string("gemm: ") + gemm_compute_name(args.compute) + " is not supported on this " +
                      device_kind_name(info().kind) + " device");
  gemm_impl(args);
}

}  // namespace mpb
