#!/usr/bin/python3
"""scripts/mpbench/gpu/timeline.py on planted Nsight Compute exports (no GPU here).

The CSVs below have the shapes `ncu --import R --csv --page raw --print-units base` and
`--page details` print (a header, for raw a units row, quoted fields, '==PROF==' lines
before them); the figures are made up. Checked: both shapes read the same durations;
the two exports join on ID into parts of the step; the top kernels add launches of one
kernel together; bad input names its file and what is wrong.
"""

import os
import sys
import unittest

from script_test_helpers import SOURCE_DIR

sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))
from mpbench.gpu import timeline  # noqa: E402

COLS = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",' \
       '"Device","CC","gpu__time_duration.sum"'


def raw(rows, unit="nsecond"):
    out = ["==PROF== Connected to process 1234", COLS,
           '"","","","","","","","","","","","' + unit + '"']
    out += [f'"{i}","1234","runner","h","{name}","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0","{ns}"'
            for i, name, ns in rows]
    return "\n".join(out) + "\n"


KERNELS = [(0, "gemm_bf16_tn", "1,200"), (1, "layernorm_residual_fwd", "80"), (2, "gemm_bf16_tn", "1,300"),
           (3, "gemm_bf16_nt", "2,500"), (4, "adamw_kernel", "900"), (5, "copy_loss", "20"),
           (6, "xent_sparse_fwd", "300")]
RANGES = [(0, "encoder.layer.0 forward", "1,200"), (1, "encoder.layer.0 forward", "80"),
          (2, "encoder.layer.1 forward", "1,300"), (3, "encoder.layer.0 backward", "2,500"),
          (4, "gradient statistics + optimizer step", "900"), (5, "train step 12", "20"),
          (6, "cls head forward", "300")]


class Timeline(unittest.TestCase):
    def test_raw_and_details_shapes_read_the_same(self):
        details = ['"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
                   '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"']
        details += [f'"{i}","1","runner","h","{k}","1","7","(1,1,1)","(1,1,1)","0","9.0","Command line profiler metrics",'
                    f'"gpu__time_duration.sum","usecond","{float(ns.replace(",", "")) / 1e3}"' for i, k, ns in KERNELS]
        a = timeline.read_durations(raw(KERNELS))
        b = timeline.read_durations("\n".join(details))
        self.assertEqual([x[:2] for x in a], [x[:2] for x in b])
        for x, y in zip(a, b):
            self.assertAlmostEqual(x[2], y[2], places=6)
        self.assertEqual(a[0], ("0", "gemm_bf16_tn", 1200.0))  # "1,200" ns: ncu's thousands separator

    def test_units_are_converted(self):
        self.assertEqual(timeline.read_durations(raw([(0, "k", "2.5")], unit="usecond"))[0][2], 2500.0)

    def test_join_groups_the_step_into_parts(self):
        rows = timeline.join(raw(KERNELS), raw(RANGES))
        s = timeline.summarise(rows, step_ms=0.01)
        self.assertEqual(s["kernels"], 7)
        self.assertAlmostEqual(s["total_us"], 6.3)
        self.assertEqual({p: round(us, 3) for p, us in s["parts"].items()},
                         {"forward": 2.58, "backward": 2.5, "head": 0.3, "optimizer": 0.9, "other": 0.02})
        # both GEMM launches of gemm_bf16_tn together, ahead of the single larger one
        self.assertEqual(s["top"][0][:2], ("gemm_bf16_tn", 2))
        self.assertAlmostEqual(s["top"][0][2], 2.5)
        self.assertEqual([t[0] for t in s["top"][:3]], ["gemm_bf16_tn", "gemm_bf16_nt", "adamw_kernel"])
        self.assertAlmostEqual(s["gaps_ms"], 0.01 - 0.0063)
        text = "\n".join(timeline.lines("amp_bf16 fused", s))
        self.assertIn("7 kernels, 0.01 ms of kernel time in a 0.01-ms step", text)
        self.assertIn("optimizer 0.00 ms (14%)", text)

    def test_parts_of_the_model_s_range_names(self):
        for name, part in [("embeddings forward", "forward"), ("encoder.layer.11 backward", "backward"),
                           ("encoder.layer.3 recompute", "backward"), ("cls head backward", "head"),
                           ("gradient statistics + optimizer step", "optimizer"), ("train step 12", "other"),
                           ("micro-batch forward+backward", "other")]:
            self.assertEqual(timeline.part_of(name), part, name)

    def test_short_names_drop_the_parameter_list(self):
        self.assertEqual(timeline.short_name("void mpb::cuda::adamw<float, 4>(mpb::cuda::Args, int)"),
                         "mpb::cuda::adamw<float, 4>")
        self.assertEqual(timeline.short_name("sm90_xmma_gemm_bf16bf16_bf16f32"), "sm90_xmma_gemm_bf16bf16_bf16f32")

    def test_bad_input_names_the_file(self):
        with self.assertRaisesRegex(timeline.TimelineError, "k.csv: no ncu CSV header"):
            timeline.read_durations("==ERROR== no kernels were profiled\n", "k.csv")
        no_metric = COLS.replace(',"gpu__time_duration.sum"', ',"sm__cycles_elapsed.avg"') + '\n"0","1","r","h","k","1","7","","","0","9.0","5"\n'
        with self.assertRaisesRegex(timeline.TimelineError, "no gpu__time_duration.sum column"):
            timeline.read_durations(no_metric, "k.csv")
        with self.assertRaisesRegex(timeline.TimelineError, "not the same report"):
            timeline.join(raw(KERNELS), raw(RANGES[:3]), ("k.csv", "n.csv"))
        with self.assertRaisesRegex(timeline.TimelineError, "line 3: 'n/a' is not a number"):
            timeline.read_durations(raw([(0, "k", "n/a")]), "k.csv")


if __name__ == "__main__":
    unittest.main()
