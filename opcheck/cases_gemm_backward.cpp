// The backward GEMM epilogues (Epilogue::DGelu, DGeluBGrad; core/device.h):
// C = alpha op(A) op(B) * gelu'(pre_act), and with BGrad db = the column sums
// of C (Overwrite: stale contents ignored).
//
// vs float64: C within the fp32 accumulation bound (2k u s, s = |alpha|
// sum|a b|), C's rounding before the multiply and after (two half ulps of a
// 16-bit C, times max|gelu'| = 1.13), and scalar::gelu_grad's approximate
// tanh (< 1e-5 s); db = the column sums of the stored C within m fp32
// roundings (2 m u sum|C|) plus half an ulp of db.
// The CPU computes exactly the composition gemm; activation_backward(Gelu, C,
// C, pre_act); bias_grad(db, C, Overwrite) (the contract): bit for bit, checked
// on the CPU backend. cuBLASLt fuses it (its own GELU derivative, fp32 product
// times gelu' rounded once) and agrees within rounding, not bitwise.
//
// vs the CPU (CUDA): the fp32 accumulations differ by gamma s with gamma =
// 2 (k + 2) 2^-23 (tensor cores' accumulation is not IEEE); cuBLASLt's GELU
// derivative (possibly the hardware tanh, relative error ~2^-11) vs
// scalar::gelu_grad: 2^-9 (1 + |pre|) |alpha dot|; a 16-bit C: the CPU rounds
// the product to C before the multiply and after, cuBLASLt once (two ulps).
// db: the per-element allowances summed over the m rows, plus m 2^-23 sum|C|
// and one ulp of db.
//
// Paths: the fused cuBLASLt epilogue (n % 8 == 0, pre_act in C's dtype,
// aligned; db in C's dtype: DGELU_BGRAD; db fp32 with a 16-bit C: DGELU + the
// bias_grad kernel), a misaligned db view (scratch + copy), and the explicit
// fallback (n % 8 != 0; pre_act in another dtype than C).
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "opcheck/cases.h"

namespace mpb::opcheck {
namespace {

struct BwdRun {
  int64_t m, n, k;
  bool ta, tb;
  GemmCompute compute;
  DType c_dtype, pre_dtype, db_dtype;
  bool bgrad;
  int64_t db_offset = 0;  // element offset of the db view (misaligned when odd)
  float alpha = 1.0f;
  std::string str() const {
    std::ostringstream s;
    s << gemm_label(m, n, k, ta, tb, compute, c_dtype) << " pre " << short_name(pre_dtype);
    if (bgrad) s << " db " << short_name(db_dtype) << (db_offset ? " offset " + std::to_string(db_offset) : "");
    if (alpha != 1.0f) s << " alpha " << alpha;
    return s.str() + "]";
  }
};

class BackwardEpilogue : public Instance {
 public:
  explicit BackwardEpilogue(std::vector<BwdRun> runs) : runs_(std::move(runs)) {
    Gen g(seed_of("backward epilogue" + runs_.front().str(), runs_.size()));
    for (const BwdRun& r : runs_) {
      const DType op = operand_type(r.compute);
      In in;
      in.a = g.nonzero(op, r.ta ? Shape{r.k, r.m} : Shape{r.m, r.k});
      in.b = g.nonzero(op, r.tb ? Shape{r.n, r.k} : Shape{r.k, r.n});
      in.pre = g.nonzero(r.pre_dtype, Shape{r.m, r.n}, 0.01f, 3.0f);  // both GELU tails and the curved middle
      ins_.push_back(std::move(in));
    }
  }
  Outputs run(Device& dev) override {
    Outputs o;
    for (size_t i = 0; i < runs_.size(); ++i) {
      const BwdRun& r = runs_[i];
      DeviceBuffer a = put(dev, ins_[i].a), b = put(dev, ins_[i].b), pre = put(dev, ins_[i].pre);
      DeviceBuffer c = dev.alloc(Shape{r.m, r.n}, r.c_dtype, MemCategory::Activations);
      DeviceBuffer db = put(dev, filled(r.db_dtype, Shape{r.db_offset + r.n}, 77.0f));  // stale: DGeluBGrad overwrites
      const Tensor dbv = db.tensor().flat_slice(r.db_offset, r.n);
      GemmArgs g;
      g.m = r.m, g.n = r.n, g.k = r.k, g.trans_a = r.ta, g.trans_b = r.tb;
      g.a = a, g.b = b, g.c = c, g.alpha = r.alpha, g.compute = r.compute, g.pre_act = pre;
      g.epilogue = r.bgrad ? Epilogue::DGeluBGrad : Epilogue::DGelu;
      if (r.bgrad) g.bias_grad_out = dbv;
      dev.gemm(g);
      o.add(nm("C", i), dev, c);
      if (r.bgrad) o.add(nm("db", i), dev, dbv);
      // The unfused composition on the same device.
      GemmArgs u = g;
      DeviceBuffer cu = dev.alloc(Shape{r.m, r.n}, r.c_dtype, MemCategory::Activations);
      u.c = cu, u.epilogue = Epilogue::None, u.pre_act = Tensor{}, u.bias_grad_out = Tensor{};
      dev.gemm(u);
      dev.activation_backward(Activation::Gelu, cu, cu, pre);
      o.add(nm("unfused C", i), dev, cu);
      if (r.bgrad) {
        DeviceBuffer dbu = dev.alloc(Shape{r.n}, r.db_dtype, MemCategory::Grads);
        dev.bias_grad(dbu, cu, GradMode::Overwrite);
        o.add(nm("unfused db", i), dev, dbu);
      }
    }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    for (size_t i = 0; i < runs_.size(); ++i) {
      const BwdRun& r = runs_[i];
      const Ref f = reference(i, got[nm("C", i)]);
      std::vector<double> tc(f.c.size());
      for (size_t e = 0; e < tc.size(); ++e) tc[e] = f.tol_c[e] + (c.cuda() ? f.cpu_c[e] : 0.0);
      c.near(nm("C", i), got[nm("C", i)], f.c, tc);
      if (r.bgrad) {
        std::vector<double> td(f.db.size());
        for (size_t j = 0; j < td.size(); ++j) td[j] = f.tol_db[j] + (c.cuda() ? f.cpu_db[j] + f.cpu_db_csum[j] : 0.0);
        c.near(nm("db", i), got[nm("db", i)], f.db, td);
      }
      if (!c.cuda()) {  // the CPU's contract: exactly the composition
        c.same_bits("DGelu vs gemm + activation_backward " + nm("", i), got[nm("C", i)], got[nm("unfused C", i)]);
        if (r.bgrad) c.same_bits("DGeluBGrad's db vs bias_grad " + nm("", i), got[nm("db", i)], got[nm("unfused db", i)]);
      }
    }
  }
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    for (size_t i = 0; i < runs_.size(); ++i) {
      const BwdRun& r = runs_[i];
      const Ref f = reference(i, cpu[nm("C", i)]);
      c.vs_cpu(nm("C", i), got[nm("C", i)], cpu[nm("C", i)], [&](int64_t e, double) { return f.cpu_c[static_cast<size_t>(e)]; });
      if (r.bgrad)
        c.vs_cpu(nm("db", i), got[nm("db", i)], cpu[nm("db", i)], [&](int64_t j, double) { return f.cpu_db[static_cast<size_t>(j)]; });
    }
  }

 private:
  // Output names: what, the run's index (runs may share a label) and its label.
  std::string nm(const char* what, size_t i) const { return std::string(what) + " #" + std::to_string(i) + " " + runs_[i].str(); }
  struct In {
    Host a, b, pre;
  };
  struct Ref {
    std::vector<double> c, tol_c, cpu_c;                    // C: exact, vs float64, vs the CPU
    std::vector<double> db, tol_db, cpu_db, cpu_db_csum;    // db: the sums of the stored C, ...
  };
  // c_stored: a device's C (the db reference sums it).
  Ref reference(size_t i, const Host& c_stored) const {
    const BwdRun& r = runs_[i];
    const In& in = ins_[i];
    const Product p = gemm_ref(in.a.values(), in.b.values(), r.m, r.n, r.k, r.ta, r.tb);
    const double gamma = 2.0 * (r.k + 2) * 0x1p-23;
    Ref f;
    const size_t mn = static_cast<size_t>(r.m * r.n);
    f.c.resize(mn), f.tol_c.resize(mn), f.cpu_c.resize(mn);
    for (size_t e = 0; e < mn; ++e) {
      const double pre = in.pre.value(static_cast<int64_t>(e));
      const double s = std::fabs(r.alpha) * p.s[e], ref = r.alpha * p.p[e] * gelu_grad(pre);
      f.c[e] = ref;
      f.tol_c[e] = kGeluLipschitz * (2.0 * r.k * kU32 * s + 2.0 * half_ulp_of(r.c_dtype, s)) + 1e-5 * s +
                   2.0 * half_ulp_of(r.c_dtype, ref);
      f.cpu_c[e] = kGeluLipschitz * (gamma * s + 2.0 * half_ulp_of(r.c_dtype, s)) +
                   0x1p-9 * (1.0 + std::fabs(pre)) * std::fabs(r.alpha * p.p[e]) + 4.0 * half_ulp_of(r.c_dtype, ref);
    }
    if (!r.bgrad) return f;
    for (int64_t j = 0; j < r.n; ++j) {
      double sum = 0, mag = 0, tsum = 0;
      for (int64_t row = 0; row < r.m; ++row) {
        const auto e = static_cast<size_t>(row * r.n + j);
        sum += c_stored.value(static_cast<int64_t>(e));
        mag += std::fabs(c_stored.value(static_cast<int64_t>(e)));
        tsum += f.cpu_c[e];
      }
      f.db.push_back(sum);
      f.tol_db.push_back(2.0 * r.m * kU32 * mag + half_ulp_of(r.db_dtype, sum));
      f.cpu_db.push_back(tsum + r.m * 0x1p-23 * mag + 2.0 * half_ulp_of(r.db_dtype, sum));
      f.cpu_db_csum.push_back(tsum);  // the device's C vs the CPU's, summed (the reference sums the device's)
    }
    return f;
  }

  std::vector<BwdRun> runs_;
  std::vector<In> ins_;
};

}  // namespace

void add_backward_epilogue_cases(std::vector<OpCase>& v) {
  const char* tol = "C 1.13 (2k u s + 2 half ulps) + 1e-5 s + 2 half ulps; db 2 m u sum|C| + half an ulp";
  auto add = [&](std::string variant, std::string types, std::vector<BwdRun> runs, Size size = Size::Small) {
    v.push_back(make_case<BackwardEpilogue>("gemm (dgelu epilogues)", std::move(variant), std::move(types), size, tol, false,
                                            std::move(runs)));
  };
  for (GemmCompute cm : {GemmCompute::F32, GemmCompute::BF16, GemmCompute::F16}) {
    const DType op = operand_type(cm);
    // Every transpose, C and db in fp32 and the operands' type, DGelu and DGeluBGrad.
    std::vector<BwdRun> grid;
    for (int tr = 0; tr < 4; ++tr) {
      const bool ta = (tr & 1) != 0, tb = (tr & 2) != 0;
      for (DType cdt : {DType::F32, op}) {
        for (DType dbt : {DType::F32, op}) {
          for (bool bgrad : {false, true}) grid.push_back(BwdRun{37, 29, 53, ta, tb, cm, cdt, cdt, dbt, bgrad});
          if (cdt == DType::F32 && dbt == DType::F32) grid.push_back(BwdRun{64, 40, 96, ta, tb, cm, cdt, cdt, dbt, true, 0, 0.5f});
          if (op == DType::F32) break;
        }
        if (op == DType::F32) break;
      }
    }
    add("37x29x53 4 transposes x C/db dtypes (+64x40x96 alpha 0.5)", gemm_compute_name(cm), grid);
    // The GPU's fused path: n % 8 == 0, pre_act in C's dtype.
    std::vector<BwdRun> fused;
    for (int tr = 0; tr < 4; ++tr) {
      const bool ta = (tr & 1) != 0, tb = (tr & 2) != 0;
      fused.push_back(BwdRun{48, 64, 40, ta, tb, cm, op, op, op, false});
      fused.push_back(BwdRun{48, 64, 40, ta, tb, cm, op, op, op, true});
      fused.push_back(BwdRun{48, 64, 40, ta, tb, cm, op, op, DType::F32, true});  // db dtype != C: DGELU + bias_grad
    }
    fused.push_back(BwdRun{33, 24, 72, false, true, cm, DType::F32, DType::F32, DType::F32, true, 0, 0.5f});
    add("48x64x40 4 transposes, fused path", gemm_compute_name(cm), fused);
  }
  add("misaligned db view", "f32, bf16",
      {BwdRun{32, 64, 48, false, false, GemmCompute::F32, DType::F32, DType::F32, DType::F32, true, 1},
       BwdRun{32, 64, 48, false, true, GemmCompute::BF16, DType::BF16, DType::BF16, DType::BF16, true, 3}});
  add("fallback: n % 8 != 0, pre_act of another dtype", "f32, bf16, f16",
      {BwdRun{37, 29, 53, false, false, GemmCompute::F32, DType::F32, DType::F32, DType::F32, true},
       BwdRun{37, 29, 53, true, false, GemmCompute::BF16, DType::BF16, DType::BF16, DType::F32, true},
       BwdRun{32, 64, 48, false, true, GemmCompute::F16, DType::F16, DType::F32, DType::F16, true},
       BwdRun{32, 64, 48, false, false, GemmCompute::BF16, DType::F32, DType::BF16, DType::F32, false}});
  // BERT's FFN backward: dH = (dY W2) * gelu'(pre), db1 from the same pass.
  add("BERT FFN dX 128x3072x768", "bf16 C bf16 db f32",
      {BwdRun{128, 3072, 768, false, false, GemmCompute::BF16, DType::BF16, DType::BF16, DType::F32, true}}, Size::Bert);
}

}  // namespace mpb::opcheck
