#!/usr/bin/python3
"""compare.py names exactly which environment fields differ between two result sets.

Machine, CPU governor, libraries, compiler and build flags, git commit and dirty
flag, environment overrides (manifest.json, docs/RESULTS.md): a text section and
the JSON field "environment_differences". Unit tests of scripts/mpbench_environment.py
on plain manifests, then compare.py as a subprocess on sets the runner made.
"""

import copy
import json
import os
import unittest

from script_test_helpers import TempDirTest, edit_manifest, fixtures, run_script

from mpbench.results.environment import environment_differences, environment_text  # noqa: E402


def runner_environment_fields():
    """The build and environment record (git, build, environment) of a real run's manifest, as of a
    clean checkout (git.dirty false: the build's tree may be dirty) run without the OMP_NUM_THREADS
    override the fixtures run under."""
    with open(os.path.join(fixtures.pristine_run(), "manifest.json"), encoding="utf-8") as f:
        written = json.load(f)
    fields = {key: written[key] for key in ("git", "build", "environment")}
    fields["environment"]["overrides"] = {}
    fields["git"]["dirty"] = False
    return fields


def manifest(**changes):
    """A manifest as the runner writes it (its build and environment record a real run's), with
    dotted-key changes."""
    m = {"compiler": "GNU 12.2.0", "git_commit": "abc",
         "machine": {"hostname": "h", "cpu_model": "EPYC", "cores": 2, "cpu_flags": ["avx2"], "memory_bytes": 8,
                     "os": "Debian", "kernel": "6.1",
                     "cpu_clocks": {"governor": None, "mhz": 2596.1, "why": "no cpufreq in this VM"}},
         "libraries": {"onednn": "3.0.0", "cublas": None},
         "device": {"kind": "cpu", "name": "EPYC", "gpu": None}}
    m.update(runner_environment_fields())
    for key, value in changes.items():
        node = m
        parts = key.split("__")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if value is DELETE:
            del node[parts[-1]]
        else:
            node[parts[-1]] = value
    return m


DELETE = object()


def fields(differences):
    return [d["field"] for d in differences]


class EnvironmentDifferences(unittest.TestCase):
    """mpbench_environment on manifests (dotted keys written with __ in manifest())."""

    def test_identical_manifests_have_no_difference(self):
        self.assertEqual(environment_differences(manifest(), manifest()), [])
        self.assertIn("the same in both sets", environment_text([]))

    def test_names_each_differing_field_with_its_group(self):
        base = manifest()
        new = manifest(libraries__cublas="12.4.5", machine__cpu_clocks__governor="performance",
                       compiler="GNU 13.1.0", git_commit="def", git__dirty=True,
                       build__cxx_flags=" -O2", machine__kernel="6.5")
        diffs = {d["field"]: d for d in environment_differences(base, new)}
        self.assertEqual(set(diffs), {"libraries.cublas", "machine.cpu_clocks.governor", "compiler",
                                      "git_commit", "git.dirty", "build.cxx_flags", "machine.kernel"})
        self.assertEqual(diffs["libraries.cublas"], {"group": "libraries", "field": "libraries.cublas",
                                                     "base": None, "new": "12.4.5"})
        self.assertEqual(diffs["machine.cpu_clocks.governor"]["group"], "governor")
        self.assertEqual(diffs["git.dirty"]["group"], "git")
        self.assertEqual(diffs["build.cxx_flags"]["group"], "compiler")
        self.assertEqual(diffs["machine.kernel"]["group"], "machine")

    def test_clock_snapshot_is_not_a_difference(self):
        # An idle MHz reading differs between any two runs; the governor decides the clock under load.
        new = manifest(machine__cpu_clocks__mhz=3400.0)
        self.assertEqual(environment_differences(manifest(), new), [])

    def test_override_set_in_one_run_only(self):
        new = manifest(environment__overrides={"NVIDIA_TF32_OVERRIDE": "0"})
        (d,) = environment_differences(manifest(), new)
        self.assertEqual((d["group"], d["field"], d["new"], d["base_missing"]),
                         ("overrides", "environment.overrides.NVIDIA_TF32_OVERRIDE", "0", "not set"))
        self.assertIn("(not set) -> 0", environment_text([d]))

    def test_fields_an_older_runner_did_not_record(self):
        old = manifest(environment=DELETE, git=DELETE, build=DELETE)
        del old["machine"]["cpu_clocks"]
        diffs = {d["field"]: d for d in environment_differences(old, manifest())}
        self.assertEqual(diffs["environment.overrides"]["base_missing"], "not recorded")
        self.assertEqual(diffs["machine.cpu_clocks.governor"]["base_missing"], "not recorded")
        self.assertIn("git.dirty", diffs)
        self.assertNotIn("environment.overrides.NVIDIA_TF32_OVERRIDE", diffs)
        # Neither runner recorded it: nothing to say.
        self.assertEqual(environment_differences(old, old), [])

    def test_gpu_against_cpu(self):
        new = manifest(device={"kind": "cuda", "name": "cuda:0",
                               "gpu": {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}})
        diffs = {d["field"]: d for d in environment_differences(manifest(), new)}
        self.assertEqual(diffs["device.gpu.name"]["base"], None)     # recorded: no GPU
        self.assertNotIn("base_missing", diffs["device.gpu.name"])
        self.assertIn("device.kind", diffs)
        self.assertIn("none -> NVIDIA H100 80GB HBM3", environment_text(list(diffs.values())))


    def test_same_gpu_model_with_another_card_or_link(self):
        def gpu(vbios, width, lock):
            nvml = {"uuid": "GPU-1", "vbios": vbios, "ecc": {"current": "enabled", "pending": "enabled"},
                    "mig": {"current": "disabled", "pending": "disabled"}, "persistence_mode": "enabled",
                    "applications_clocks_mhz": {"sm": 1755, "mem": 2619}, "max_clocks_mhz": {"sm": 1980, "mem": 2619},
                    "pcie": {"generation": 5, "width": width, "max_generation": 5, "max_width": 16},
                    "nvlink_active_links": 18}
            return manifest(device={"kind": "cuda", "name": "H100", "clock_lock": lock,
                                    "gpu": {"name": "H100", "compute_capability": "9.0", "nvml": nvml}})
        same = gpu("96.00.99.00.01", 16, None)
        self.assertEqual(environment_differences(same, copy.deepcopy(same)), [])
        diffs = environment_differences(same, gpu("96.00.A0.00.01", 8, {"requested": "base", "applied": True}))
        self.assertEqual(fields(diffs), ["device.gpu.nvml.vbios", "device.gpu.nvml.pcie.width",
                                         "device.clock_lock.requested"])
        self.assertEqual({d["group"] for d in diffs}, {"gpu"})
        self.assertIn("none -> base", environment_text(diffs))


class CompareNamesEnvironment(TempDirTest):
    """compare.py BASE NEW: the text section and the JSON field."""

    def compare(self, base, new):
        out = os.path.join(self.tmp, "cmp.json")
        proc = run_script("compare.py", base, new, "--json", out)
        with open(out) as f:
            return proc, json.load(f)

    def test_same_environment_says_so(self):
        base = self.make_set("base")
        proc, report = self.compare(base, base)
        self.assertExit(proc, 0)
        self.assertIn("Environment: the same in both sets "
                      "(machine, gpu, governor, libraries, compiler, git, overrides)", proc.stdout)
        self.assertEqual(report["environment_differences"], [])

    def test_same_machine_lists_what_changed_without_failing(self):
        base = self.make_set("base")
        new = self.make_set("new")
        with open(os.path.join(base, "manifest.json"), encoding="utf-8") as f:
            written = json.load(f)
        # Both as run from a clean checkout on a machine with cpufreq and oneDNN 3.0.0 (the VM reports no
        # governor, and the runner may have been built from a dirty tree).
        for results in (base, new):
            edit_manifest(results, lambda m: (m["machine"]["cpu_clocks"].update(governor="performance"),
                                              m["libraries"].update(onednn="3.0.0"), m["git"].update(dirty=False)))

        def edit(m):
            m["libraries"]["onednn"] = "3.1.0"
            m["machine"]["cpu_clocks"]["governor"] = "powersave"
            m["environment"]["overrides"]["NVIDIA_TF32_OVERRIDE"] = "0"
            m["git"]["dirty"] = True
            m["git_commit"] = m["git"]["commit"] = "def456"
            m["build"]["cxx_flags"] = " -O2"
        edit_manifest(new, edit)
        proc, report = self.compare(base, new)
        self.assertExit(proc, 0)   # a different environment is context, not a regression
        self.assertTrue(report["same_machine"])
        # In report order: machine, governor, compiler, git, libraries, overrides.
        self.assertEqual(fields(report["environment_differences"]),
                         ["machine.cpu_clocks.governor", "build.cxx_flags", "git_commit", "git.dirty",
                          "libraries.onednn", "environment.overrides.NVIDIA_TF32_OVERRIDE"])
        self.assertIn("Environment differences, BASE -> NEW (6):", proc.stdout)
        for line in ("libraries.onednn", "3.0.0 -> 3.1.0", "performance -> powersave",
                     "(not set) -> 0", "false -> true", f"{written['git_commit']} -> def456"):
            self.assertIn(line, proc.stdout)
        # Printed before the verdicts, beside the sets it describes.
        self.assertLess(proc.stdout.index("Environment differences"), proc.stdout.index("Change NEW vs BASE"))

    def test_different_machines_list_the_machine_fields(self):
        base = self.make_set("base", machine="a100")
        new = self.make_set("new", machine="h100")
        proc, report = self.compare(base, new)
        self.assertExit(proc, 0)
        self.assertFalse(report["same_machine"])
        diffs = set(fields(report["environment_differences"]))
        self.assertTrue({"device.gpu.name", "device.gpu.compute_capability", "libraries.cublas",
                         "libraries.cuda_runtime", "machine.hostname"} <= diffs, diffs)
        self.assertIn("NVIDIA A100-SXM4-40GB -> NVIDIA H100 80GB HBM3", proc.stdout)

    def test_older_runner_fields_read_not_recorded(self):
        base = self.make_set("base", legacy=True)
        new = self.make_set("new")
        proc, report = self.compare(base, new)
        self.assertExit(proc, 0)
        by_field = {d["field"]: d for d in report["environment_differences"]}
        self.assertEqual(by_field["environment.overrides"]["base_missing"], "not recorded")
        self.assertIn("(not recorded) -> ", proc.stdout)


if __name__ == "__main__":
    unittest.main()
