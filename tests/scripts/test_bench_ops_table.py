#!/usr/bin/python3
"""scripts/bench_ops_table.py: Google Benchmark JSON (bench/bench_ops.cpp's
counters) to docs/PERFORMANCE.md's tables. Hand-made JSON with known numbers:
the fused/unfused ratio, the median of repetitions, the bound from the ridge
(ceiling / triad), and --update between the markers, leaving the rest alone."""

import json
import os
import unittest

from script_test_helpers import TempDirTest, run_script

from mpbench import ops_table as bot

TRIAD = 20e9          # bytes/s
CEIL32 = 200e9        # FLOP/s: fp32 ridge = 10 FLOP/byte
CEIL16 = 400e9


def run(name, real_time_ms, **counters):
    return dict({"name": name + "/real_time", "run_name": name + "/real_time", "run_type": "iteration",
                 "real_time": real_time_ms, "time_unit": "ms"}, **counters)


def doc():
    bench = [
        {"name": "BM_MachineBounds/iterations:1", "run_name": "BM_MachineBounds/iterations:1",
         "run_type": "iteration", "real_time": 100.0, "time_unit": "ms", "triad_bytes/s": TRIAD,
         "ceiling_fp32_FLOP/s": CEIL32, "ceiling_bf16_FLOP/s": CEIL16},
        # Bandwidth-bound (1 FLOP/byte < 10): 10 GB/s is half the triad.
        run("BM_SoftmaxXent/mini_fp32_fused", 2.0, **{"bytes/s": 10e9, "FLOP/s": 10e9}),
        run("BM_SoftmaxXent/mini_fp32_unfused", 3.0, **{"bytes/s": 6e9, "FLOP/s": 6e9}),
        # Compute-bound (100 FLOP/byte): 100 GFLOP/s is a quarter of the bf16 ceiling.
        run("BM_Attention/base_bf16_fused", 8.0, **{"bytes/s": 1e9, "FLOP/s": 100e9}),
        run("BM_Attention/base_bf16_unfused", 4.0, **{"bytes/s": 2e9, "FLOP/s": 200e9}),
        run("BM_GemmLayer/mini_qkv_dW_bf16", 1.0, **{"bytes/s": 1e9, "FLOP/s": 300e9, "frac_ceiling": 0.75}),
    ]
    # Three repetitions of the AdamW pair and their median aggregate: the median is used.
    for t in (5.0, 9.0, 1.0):
        bench.append(dict(run("BM_AdamW/mini_fp32_fused", t, **{"bytes/s": 1e9, "FLOP/s": 1e9}), repetition_index=0))
    bench.append(dict(run("BM_AdamW/mini_fp32_fused", 4.0, **{"bytes/s": 5e9, "FLOP/s": 1e9}), run_type="aggregate",
                      aggregate_name="median", name="BM_AdamW/mini_fp32_fused/real_time_median"))
    bench.append(dict(run("BM_AdamW/mini_fp32_fused", 9.9, **{"bytes/s": 1e9, "FLOP/s": 1e9}), run_type="aggregate",
                      aggregate_name="mean", name="BM_AdamW/mini_fp32_fused/real_time_mean"))
    bench.append(run("BM_AdamW/mini_fp32_unfused", 6.0, **{"bytes/s": 1e9, "FLOP/s": 1e9}))
    return {"context": {"host_name": "testhost", "num_cpus": 2, "cpu_kernels": "avx2 (MPB_CPU_ISA)",
                        "gemm_isa": "onednn avx2"}, "benchmarks": bench}


def row(text, first_cells):
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[:len(first_cells)] == first_cells:
            return cells
    raise AssertionError(f"no row starting {first_cells} in:\n{text}")


class Tables(unittest.TestCase):

    def setUp(self):
        self.text = bot.tables(doc())

    def test_context_and_bounds(self):
        self.assertIn("CPU kernels: avx2 (MPB_CPU_ISA)", self.text)
        self.assertIn("STREAM triad 20.0 GB/s, GEMM ceiling fp32 200 / bf16 400 GFLOP/s", self.text)

    def test_bandwidth_bound_op(self):
        r = row(self.text, ["softmax cross-entropy (sparse head)", "mini", "fp32"])
        self.assertEqual(r[3:6], ["2.000 ms", "3.000 ms", "1.50x"])
        self.assertEqual(r[8:10], ["bandwidth", "50%"])

    def test_compute_bound_op_uses_its_precisions_ceiling(self):
        r = row(self.text, ["attention fwd+bwd", "base", "bf16"])
        self.assertEqual(r[5], "0.50x")  # fusion loses: reported as it is
        self.assertEqual(r[8:10], ["compute", "25%"])

    def test_median_of_repetitions(self):
        r = row(self.text, ["AdamW step (fp32 state)", "mini"])
        self.assertEqual(r[3:6], ["4.000 ms", "6.000 ms", "1.50x"])

    def test_gemm_rows(self):
        r = row(self.text, ["qkv dW", "mini", "bf16"])
        self.assertEqual(r[3:6], ["1.000 ms", "300.0", "75%"])


class Update(TempDirTest):

    def files(self, markdown):
        """ops.json (doc()) and PERF.md (markdown) in the temporary directory: their paths."""
        src, md = os.path.join(self.tmp, "ops.json"), os.path.join(self.tmp, "PERF.md")
        with open(src, "w", encoding="utf-8") as f:
            json.dump(doc(), f)
        with open(md, "w", encoding="utf-8") as f:
            f.write(markdown)
        return src, md

    def test_replaces_only_between_the_markers(self):
        src, md = self.files(f"# Before\n\n{bot.BEGIN}\nold table\n{bot.END}\n\nAfter.\n")
        p = run_script("bench_ops_table.py", src, "--update", md)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(md, encoding="utf-8") as f:
            out = f.read()
        self.assertTrue(out.startswith("# Before\n\n" + bot.BEGIN + "\n"))
        self.assertTrue(out.endswith(bot.END + "\n\nAfter.\n"))
        self.assertNotIn("old table", out)
        self.assertIn("| softmax cross-entropy (sparse head) | mini | fp32 |", out)

    def test_missing_markers_or_bad_json_fail_without_writing(self):
        src, md = self.files("no markers\n")
        p = run_script("bench_ops_table.py", src, "--update", md)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no bench_ops markers", p.stderr)
        with open(md, encoding="utf-8") as f:
            self.assertEqual(f.read(), "no markers\n")
        with open(src, "w", encoding="utf-8") as f:
            f.write("{not json")
        p = run_script("bench_ops_table.py", src)
        self.assertEqual(p.returncode, 2)
        self.assertIn("ops.json", p.stderr)


if __name__ == "__main__":
    unittest.main()
