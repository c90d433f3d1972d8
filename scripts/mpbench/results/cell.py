"""One cell's result file as an object (docs/RESULTS.md, "Cell files").

Why a module of its own: `Cell` is the one place that knows a cell file's field
names and which of them are optional, so that the report and compare scripts
never index the JSON themselves. Every accessor tolerates an optional field being
absent (older runners, synthetic sets): it returns None, NaN or an empty array.
The per-cell records it hands out (the speed-up interval, the step-noise summary)
are defined here too. Loading and validating files is results.load's job.
"""

import json
import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from mpbench.results.values import dotted_get, finite, parse_map_setting, setting_string, to_array, to_float


@dataclass
class SpeedupInterval:
    """summary.speedup_interval: a confidence interval of the speed-up over the baseline."""
    lo: float
    hi: float
    confidence: float = math.nan      # 0.95 for a 95% interval; NaN when not recorded
    method: str = ""
    resamples: int = None
    units: object = None              # as written: a count, or {"baseline": n, "cell": m}

    def contains(self, value):
        return self.lo <= value <= self.hi

    def confidence_text(self):
        """"95%" (or "" when the runner did not say)."""
        return f"{100 * self.confidence:g}%" if finite(self.confidence) else ""


@dataclass
class StepNoise:
    """summary.noise: how spread out one cell's timed steps were (measured, never used to drop data)."""
    cv: float = math.nan
    robust_cv: float = math.nan
    p90_over_median: float = math.nan
    noisy: bool = False
    reasons: list = field(default_factory=list)
    outlier_rule: str = ""


def _object_field(key):
    """A read-only Cell property: the cell file's object `key`, or {} when it is absent or null."""
    return property(lambda cell: cell.data.get(key) or {}, doc=f"The cell file's {key!r} object ({{}} when absent).")


@dataclass
class Cell:
    """One cell's JSON file. Accessors tolerate every optional field being absent."""

    path: str
    data: dict

    @property
    def cell_id(self):
        return self.data["cell_id"]

    @property
    def slug(self):
        return self.data.get("slug") or os.path.splitext(os.path.basename(self.path))[0]

    # The file's objects, {} when absent or null (include cells, older runners).
    axes = _object_field("axes")
    config = _object_field("config")
    device = _object_field("device")
    summary = _object_field("summary")

    @property
    def config_hash(self):
        return self.data.get("config_hash")

    @property
    def is_baseline(self):
        return bool(self.data.get("is_baseline"))

    @property
    def repeats(self):
        return [r for r in self.data.get("repeats") or [] if isinstance(r, dict)]

    def axis_order(self):
        """The cell's axis keys in the order its cell_id names them ("precision=..,fusion=..")."""
        cid = self.cell_id
        def position(key):
            match = re.search(r"(?:^|,)" + re.escape(key) + "=", cid)
            return match.start() if match else len(cid)
        return sorted(self.axes, key=position)     # stable: unknown keys keep their order, last

    def setting(self, key):
        """The cell's value for an axis/config key as a string.

        Include cells only list the keys they set, so a key absent from `axes`
        falls back to the resolved config (every cell has every config key).
        """
        if key in self.axes:
            return setting_string(self.axes[key])
        return setting_string(dotted_get(self.config, key))

    def loss_scale_mode(self):
        """none | static | dynamic, whichever way loss_scale was written."""
        raw = self.axes.get("loss_scale", dotted_get(self.config, "loss_scale"))
        if isinstance(raw, dict):
            return str(raw.get("mode", "static"))
        if raw is None:
            return "none"
        text = setting_string(raw).strip()
        # canonical ids spell a map as its mode plus changed fields: "dynamic{init:1024}"
        mode = re.match(r"(none|static|dynamic)\b", text)
        if mode:
            return mode.group(1)
        if not text:
            return "none"
        try:
            float(text)
            return "static"      # a bare number is a static scale
        except ValueError:
            pass
        if text.startswith("{"):
            try:
                return str(json.loads(text).get("mode", "static"))
            except (ValueError, AttributeError):
                pass
        return text

    def summary_value(self, key):
        """A summary number (dotted for nested, e.g. "step_time_ms.median") or NaN."""
        return to_float(dotted_get(self.summary, key))

    def summary_list(self, key):
        """A per-repeat summary list (samples_per_s_repeats, ...) as an array."""
        return to_array(self.summary.get(key))

    def memory(self, category):
        """Peak memory of one category (or "total") in bytes, NaN when absent."""
        return to_float((self.summary.get("peak_memory_bytes") or {}).get(category))

    def memory_figure(self, name):
        """One figure of the memory triple (summary.memory: "process_peak_bytes", "device_used_peak_bytes"),
        in bytes; NaN when absent (the figure was null, or the runner predates it)."""
        return to_float((self.summary.get("memory") or {}).get(name))

    def series(self, key):
        """One array per repeat for a per-step series (loss, step_time_ms, ...)."""
        return [to_array(r.get(key)) for r in self.repeats]

    def numerics_samples(self):
        """(repeat index, sample dict) for every numerics sample of every repeat."""
        out = []
        for i, r in enumerate(self.repeats):
            numerics = r.get("numerics")
            if isinstance(numerics, dict):
                out.extend((i, s) for s in numerics.get("samples") or [] if isinstance(s, dict))
        return out

    def fp8_tensors(self):
        """(repeat index, step, tensor dict) for every FP8 tensor of every numerics sample.

        Only precision fp8 samples carry an "fp8" list (one entry per linear layer's
        input, weight and grad_output: name, format, scale, amax, saturated_fraction);
        other cells, and runners from before FP8, give an empty list.
        """
        return [(i, s.get("step"), t) for i, s in self.numerics_samples()
                for t in s.get("fp8") or [] if isinstance(t, dict)]

    def any_skipped(self):
        """Whether any optimizer step of any repeat was skipped (non-finite grads)."""
        if finite(to_float(self.summary.get("skipped_steps"))) and to_float(self.summary.get("skipped_steps")) > 0:
            return True
        return any(np.nansum(s) > 0 for s in self.series("skipped"))

    def emulated_ops(self):
        """{op: how} for ops this device only emulates (anything other than native).

        `device.emulated` is a map op -> "native" | description; a bare bool or
        string is accepted too so a future runner can simplify the field.
        """
        emulated = self.device.get("emulated")
        if isinstance(emulated, dict):
            return {op: str(how) for op, how in emulated.items()
                    if how not in (None, False, "native", "")}
        if emulated is True:
            return {"all": "emulated"}
        if isinstance(emulated, str) and emulated not in ("", "native"):
            return {"all": emulated}
        return {}

    def warmup_steps(self):
        """Steps the runner excluded from timing statistics (0 if unknown)."""
        value = to_float(self.config.get("warmup_steps"))
        return int(value) if finite(value) else 0

    def timed_steps(self):
        """Per repeat, the step times (ms) the runner's statistics use: the steps of
        its measured window (from measured_from_step) that did not also sample numerics (all post-warm-up steps when every
        one did), as runner/results/results.cpp selects them. Empty arrays where a repeat
        recorded no step times (older or synthetic sets)."""
        out = []
        for rep in self.repeats:
            # Where the runner's measured window began (runner/measure/steady_state.h); the
            # configured warm-up in files written before it recorded that.
            start = to_float(rep.get("measured_from_step"))
            warmup = int(start) if finite(start) and start >= 0 else self.warmup_steps()
            steps = to_array(rep.get("step_time_ms"))[warmup:]
            probed = rep.get("probed") or []
            keep = np.array([not (warmup + i < len(probed) and probed[warmup + i]) for i in range(steps.size)],
                            dtype=bool)
            timed = steps[keep] if keep.any() else steps
            out.append(timed[np.isfinite(timed)])
        return out

    def batch_size(self):
        value = to_float(self.config.get("batch_size"))
        return value if finite(value) and value > 0 else math.nan

    @property
    def model_kind(self):
        """config.model.kind ("mlp", "bert", ...); "" when not recorded."""
        return self.setting("model.kind")

    def map_setting(self, key):
        """A map-valued setting as {field: string}: the resolved config's map when it has
        one (every field), else the axis value's canonical "mode{field:value}" spelling.
        None when the setting is not a map (a bare "dynamic" is {"mode": "dynamic"} only
        for callers comparing it with maps)."""
        raw = dotted_get(self.config, key)
        if isinstance(raw, dict):
            return parse_map_setting(raw)
        return parse_map_setting(self.axes[key] if key in self.axes else raw)

    def speedup_interval(self):
        """summary.speedup_interval as a SpeedupInterval, or None (baseline, other model,
        too few repeats, or a result set from before intervals existed)."""
        data = self.summary.get("speedup_interval")
        if not isinstance(data, dict):
            return None
        lo, hi = to_float(data.get("lo")), to_float(data.get("hi"))
        if not (finite(lo) and finite(hi)):
            return None
        resamples = to_float(data.get("resamples"))
        return SpeedupInterval(lo=lo, hi=hi, confidence=to_float(data.get("confidence")),
                               method=str(data.get("method") or ""),
                               resamples=int(resamples) if finite(resamples) else None,
                               units=data.get("units"))

    def speedup_verdict(self):
        """"faster" | "slower" | "no measurable difference" | "baseline", or None.

        The runner's summary.speedup_verdict; derived from the interval when only that
        was written (an interval containing 1.0 is "no measurable difference").
        """
        verdict = self.summary.get("speedup_verdict")
        if isinstance(verdict, str) and verdict:
            return verdict
        interval = self.speedup_interval()
        if interval is None:
            return None
        if interval.lo > 1.0:
            return "faster"
        if interval.hi < 1.0:
            return "slower"
        return "no measurable difference"

    def records_speedup_intervals(self):
        """Whether the runner that wrote this cell knew about intervals (the key exists, maybe null)."""
        return "speedup_interval" in self.summary or "speedup_verdict" in self.summary

    def noise(self):
        """summary.noise as a StepNoise, or None when not recorded (older result sets)."""
        data = self.summary.get("noise")
        if not isinstance(data, dict):
            return None
        reasons = data.get("reasons")
        return StepNoise(cv=to_float(data.get("cv")), robust_cv=to_float(data.get("robust_cv")),
                         p90_over_median=to_float(data.get("p90_over_median")),
                         noisy=bool(data.get("noisy")),
                         reasons=[str(r) for r in reasons] if isinstance(reasons, list) else [],
                         outlier_rule=str(data.get("outlier_rule") or ""))

    def is_noisy(self):
        noise = self.noise()
        return bool(noise and noise.noisy)

    def repeat_rounds(self):
        """[(repeat number, round)] for repeats that say which round of an interleaved run they ran in."""
        out = []
        for i, r in enumerate(self.repeats):
            round_ = to_float(r.get("round"))
            if finite(round_):
                number = to_float(r.get("repeat"))
                out.append((int(number) if finite(number) else i, int(round_)))
        return out
