"""A whole result directory as an object: its manifest and its cells in run order.

Why a module of its own: what belongs to the run rather than to one cell lives
here: the baseline and speed-ups relative to it, the run order and the machine
load the runner measured (manifest.order, manifest.noise), which cells are
missing, and how a machine is identified (equal identities are "the same
machine": differences between different ones are generational, not regressions).
"""

import math
import os
from dataclasses import dataclass, field

from mpbench.results.values import finite, format_number, to_float
from mpbench.results.vocabulary import vocabulary_of


@dataclass
class LoadSample:
    """One manifest noise window: how busy the rest of the machine was."""
    loadavg: list
    other_cpu_fraction: float
    steal_fraction: float
    busy: bool
    round: int = None                 # 0-based round index; None for the window before the run

    @classmethod
    def from_json(cls, data):
        if not isinstance(data, dict):
            return None
        load = data.get("loadavg")
        round_ = data.get("round")
        return cls(loadavg=[to_float(v) for v in load] if isinstance(load, list) else [],
                   other_cpu_fraction=to_float(data.get("other_cpu_fraction")),
                   steal_fraction=to_float(data.get("steal_fraction")),
                   busy=bool(data.get("busy")),
                   round=int(round_) if finite(to_float(round_)) else None)

    def describe(self):
        """"load average 0.50 0.40 0.30, other processes 2% of the CPU time"."""
        parts = []
        if self.loadavg:
            parts.append("load average " + " ".join(format_number(v) for v in self.loadavg))
        if finite(self.other_cpu_fraction):
            parts.append(f"other processes {100 * self.other_cpu_fraction:.0f}% of the CPU time")
        if finite(self.steal_fraction) and self.steal_fraction > 0:
            parts.append(f"hypervisor steal {100 * self.steal_fraction:.0f}%")
        return ", ".join(parts) or "not measured"


@dataclass
class RunNoise:
    """manifest.noise: machine load before the run and during each round, with the runner's warnings."""
    before: LoadSample = None
    rounds: list = field(default_factory=list)    # [LoadSample], round set
    busy: bool = False
    warnings: list = field(default_factory=list)  # the runner's own sentences

    def busy_rounds(self):
        return [r for r in self.rounds if r.busy]


@dataclass
class RunOrder:
    """manifest.order: interleaved (each round runs one repeat of every cell, shuffled) or sequential."""
    mode: str
    seed: object = None
    rounds: list = field(default_factory=list)    # [[cell id, ...], ...]


@dataclass
class ResultSet:
    """A result directory: its manifest and its cells in run order."""

    path: str
    manifest: dict
    cells: list = field(default_factory=list)

    @property
    def experiment(self):
        return self.manifest.get("experiment") or os.path.basename(os.path.normpath(self.path))

    @property
    def vocabulary(self):
        """The runner's precision order, memory categories and axis keys (results.vocabulary)."""
        return vocabulary_of(self.manifest)

    @property
    def by_id(self):
        return {c.cell_id: c for c in self.cells}

    def baseline(self):
        """The cell speedups are relative to (flagged is_baseline), or None."""
        return next((c for c in self.cells if c.is_baseline), None)

    def axis_keys(self):
        """Every axis key used by any cell, in first-seen order (matrix order first).

        A cell's keys are taken in the order its cell_id lists them: the runner's
        JSON writer sorts the keys of `axes` alphabetically.
        """
        # Cached: the report asks once per cell (labels, order), so an uncached scan of every cell
        # made a 1,000-cell report quadratic (issue 43 item 4). The cache holds the list it was
        # computed from, so a view with other cells (report.figure_cells) or a grown list recomputes.
        cached = self.__dict__.get("_axis_keys_cache")
        if cached and cached[0] is self.cells and cached[1] == len(self.cells):
            return list(cached[2])
        keys = []
        for cell in self.cells:
            keys.extend(k for k in cell.axis_order() if k not in keys)
        self.__dict__["_axis_keys_cache"] = (self.cells, len(self.cells), keys)
        return list(keys)

    def varying_keys(self):
        """Axis keys whose value differs between cells (the ones worth labelling)."""
        return [k for k in self.axis_keys() if len({c.setting(k) for c in self.cells}) > 1]

    def same_model_as_baseline(self, cell):
        """Whether `cell` trains the baseline's model (config.model.kind): only then is a speed-up meaningful."""
        base = self.baseline()
        return base is not None and cell.model_kind == base.model_kind

    def speedup(self, cell):
        """samples/s over the baseline's, or NaN where there is none.

        The cell's own summary.speedup when the runner wrote the key: null means "no
        speed-up" (no baseline result, or another model than the baseline's) and stays
        NaN. Older sets without the key get the ratio computed here. Never a ratio
        across models: a cell whose config.model.kind differs from the baseline's has
        no speed-up whatever its file says. (With the baseline's file missing, the
        runner's value is all there is; it applies the same model rule.)
        """
        base = self.baseline()
        if base is not None and cell.model_kind != base.model_kind:
            return math.nan
        if "speedup" in cell.summary:
            return cell.summary_value("speedup")
        if base is None:
            return math.nan
        base_sps = base.summary_value("samples_per_s")
        sps = cell.summary_value("samples_per_s")
        return sps / base_sps if finite(base_sps) and base_sps > 0 else math.nan

    def no_speedup_reason(self, cell):
        """Why `cell` has no speed-up (short phrase), or None when it has one."""
        if finite(self.speedup(cell)):
            return None
        base = self.baseline()
        if base is None:
            return "no baseline cell"
        if cell.model_kind != base.model_kind:
            return f"another model ({cell.model_kind or '?'}) than the baseline's ({base.model_kind or '?'})"
        return "not recorded"

    def run_order(self):
        """manifest.order as a RunOrder, or None (result sets from before interleaving)."""
        order = self.manifest.get("order")
        if not isinstance(order, dict) or not order.get("mode"):
            return None
        rounds = order.get("rounds")
        rounds = [[str(c) for c in r] for r in rounds if isinstance(r, list)] if isinstance(rounds, list) else []
        return RunOrder(mode=str(order["mode"]), seed=order.get("seed"), rounds=rounds)

    def noise(self):
        """manifest.noise as a RunNoise, or None (result sets from before noise detection)."""
        data = self.manifest.get("noise")
        if not isinstance(data, dict):
            return None
        rounds = [LoadSample.from_json(r) for r in data.get("rounds") or [] if isinstance(r, dict)]
        for i, r in enumerate(rounds):
            if r.round is None:
                r.round = i
        warnings = data.get("warnings")
        before = LoadSample.from_json(data.get("before"))
        return RunNoise(before=before, rounds=rounds,
                        busy=bool(data.get("busy")) or any(r.busy for r in rounds) or bool(before and before.busy),
                        warnings=[str(w) for w in warnings] if isinstance(warnings, list) else [])

    def noisy_cells(self):
        return [c for c in self.cells if c.is_noisy()]

    def missing_cells(self):
        """Cells the manifest planned but for which no result file exists (interrupted run)."""
        planned = self.manifest.get("cells") or []
        have = self.by_id
        return [cid for cid in planned if cid not in have]

    def finished(self):
        return bool(self.manifest.get("finished"))

    def machine_identity(self):
        return machine_identity(self.manifest)

    def mixed_machines(self):
        """A set `runner merge` made of shards that ran on different machines (manifest.merged):
        its cells' numbers come from several machines, so no difference against it is a regression."""
        merged = self.manifest.get("merged")
        return isinstance(merged, dict) and bool(merged.get("mixed_machines"))

    def machine_label(self):
        return machine_label(self.manifest)


def machine_identity(manifest):
    """(device kind, device name, GPU name): equal tuples mean "the same machine".

    RESULTS.md: differences between different identities are generational,
    not regressions.
    """
    device = manifest.get("device") or {}
    gpu = device.get("gpu") or {}
    return (str(device.get("kind") or ""), str(device.get("name") or ""),
            str(gpu.get("name") or "") if isinstance(gpu, dict) else "")


def machine_label(manifest):
    """A short human name for a machine: the GPU name if any, else the device name."""
    kind, name, gpu = machine_identity(manifest)
    return gpu or name or kind or "unknown machine"


def fp32_reference(result_set, cell):
    """The same machine's fp32 (fusion off) counterpart of `cell`.

    Same values for every other axis, so a width-512 cell is compared with the
    width-512 fp32 cell. Falls back to the set's baseline cell when that trains the
    same model (config.model.kind), else None.
    """
    wanted = {k: cell.setting(k) for k in result_set.axis_keys()}
    wanted["precision"] = "fp32"
    if "fusion" in wanted:
        wanted["fusion"] = "off"
    for other in result_set.cells:
        if all(other.setting(k) == v for k, v in wanted.items()):
            return other
    # the baseline only stands in for a cell of its own model: a ratio across models means nothing
    return result_set.baseline() if result_set.same_model_as_baseline(cell) else None
