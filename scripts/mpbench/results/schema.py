"""The one schema check of result files (docs/RESULTS.md): every field's type, cells and manifest.

Why a module of its own: report.py, compare.py, generations.py and ab_compare.py
read results only through results.load, which calls `check_cell_fields` and
`check_manifest_fields` once per file before any accessor runs. So a hand-edited or damaged file (an int where an object
belongs, a string where a number does, NaN or a negative throughput) is an input
error that names the file, the field and the expected type (exit 2 in every
script), never a traceback deep in a plot (exit 1, which a CI gate reads as a
regression: issue 33 defect 2).

Rules, in the order they are checked:
  * No number anywhere in the file is NaN, infinite or beyond a float's range.
    The runner writes a non-finite value (a diverged loss) as null
    (runner/results/results.cpp), so a NaN, Infinity, 1e999 or a 400-digit integer can
    only come from a hand edit.
  * Each field of CELL_FIELDS (MANIFEST_FIELDS) has its type when present and not null (every field
    but the four results.load requires is optional: older runners, include cells).
  * A measurement (a time, a rate, a byte count, a ratio of two of them) is never
    negative: a negative throughput beside a stored speed-up is a hand edit.
Fields not in the table (a newer runner's) are only held to the first rule.
"""

import math


class FieldError(Exception):
    """`field` (dotted, with [i] for list items) is not of the `expected` type; results.load adds the file."""

    def __init__(self, field, expected, value):
        got = type(value).__name__
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        super().__init__(f"field {field}: expected {expected}, got {got} {shown}")


class Kind:
    """A leaf type: `name` is what the error message says was expected."""

    def __init__(self, name, accepts):
        self.name, self.accepts = name, accepts

    def check(self, field, value):
        if not self.accepts(value):
            raise FieldError(field, self.name, value)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


STRING = Kind("a string", lambda v: isinstance(v, str))
BOOL = Kind("true or false", lambda v: isinstance(v, bool))
OBJECT = Kind("an object", lambda v: isinstance(v, dict))
LIST = Kind("a list", lambda v: isinstance(v, list))
NUMBER = Kind("a finite number", _is_number)                 # a loss may be negative in principle
MEASUREMENT = Kind("a finite number >= 0", lambda v: _is_number(v) and v >= 0)
# The few fields whose value is mixed on purpose (device.emulated: a map, a bool or a string).
ANY = Kind("anything", lambda v: True)


class ListOf:
    """A list whose items (null allowed: a non-finite value the runner wrote as null) are `item`."""

    def __init__(self, item):
        self.item = item
        self.name = f"a list of {getattr(item, 'name', 'objects')}"

    def check(self, field, value):
        LIST.check(field, value)
        for i, v in enumerate(value):
            if v is not None:
                self.item.check(f"{field}[{i}]", v)


class NonEmptyListOf(ListOf):
    """A ListOf with at least one item (a cell file's repeats: the runner writes a cell only
    when a repeat has finished)."""

    def __init__(self, item):
        super().__init__(item)
        self.name = f"a non-empty list of {getattr(item, 'name', 'objects')}"

    def check(self, field, value):
        super().check(field, value)
        if not value:
            raise FieldError(field, self.name, value)


class MapOf:
    """An object whose every value is `item` (peak_memory_bytes: category -> bytes)."""

    def __init__(self, item):
        self.item = item

    def check(self, field, value):
        OBJECT.check(field, value)
        for k, v in value.items():
            if v is not None:
                self.item.check(f"{field}.{k}", v)


class Fields:
    """An object with known fields (others allowed); each present, non-null one is checked."""

    def __init__(self, **fields):
        self.fields = fields

    def check(self, field, value):
        OBJECT.check(field, value)
        for key, kind in self.fields.items():
            if value.get(key) is not None:
                kind.check(f"{field}.{key}" if field else key, value[key])


_NUMERICS_STATS = Fields(count=MEASUREMENT, underflow_fraction=MEASUREMENT, overflow_fraction=MEASUREMENT,
                         log2_hist=Fields(lo=NUMBER, counts=ListOf(MEASUREMENT)))
_FP8_TENSOR = Fields(name=STRING, format=STRING, scale=MEASUREMENT, amax=MEASUREMENT,
                     saturated_fraction=MEASUREMENT)
_NUMERICS = Fields(sample_every=MEASUREMENT, cost_fraction=MEASUREMENT,
                   samples=ListOf(Fields(step=MEASUREMENT, grads=_NUMERICS_STATS, weight_grads=_NUMERICS_STATS,
                                         activations=_NUMERICS_STATS, fp8=ListOf(_FP8_TENSOR))))

_REPEAT = Fields(
    repeat=MEASUREMENT, round=MEASUREMENT, seed=MEASUREMENT, order=STRING,
    step_time_ms=ListOf(MEASUREMENT), loss=ListOf(NUMBER), wall_time_s=ListOf(MEASUREMENT),
    loss_scale=ListOf(MEASUREMENT), skipped=ListOf(MEASUREMENT), grad_norm=ListOf(MEASUREMENT),
    eval=ListOf(Fields(step=MEASUREMENT, loss=NUMBER, accuracy=MEASUREMENT)),
    peak_memory_bytes=MapOf(MEASUREMENT), probed=LIST, measured_from_step=MEASUREMENT,
    steady_state=OBJECT, flops_per_step=MEASUREMENT, recompute_flops_per_step=MEASUREMENT,
    model=STRING, numerics=_NUMERICS, gpu_telemetry=OBJECT, energy=OBJECT, testing=OBJECT)

_SUMMARY = Fields(
    step_time_ms=Fields(median=MEASUREMENT, p10=MEASUREMENT, p90=MEASUREMENT),
    samples_per_s=MEASUREMENT, samples_per_s_repeats=ListOf(MEASUREMENT),
    step_time_ms_repeats=ListOf(MEASUREMENT),
    speedup=MEASUREMENT, speedup_verdict=STRING,
    speedup_interval=Fields(lo=MEASUREMENT, hi=MEASUREMENT, confidence=MEASUREMENT, method=STRING,
                            resamples=MEASUREMENT, df=MEASUREMENT, units=ANY),
    gflops=MEASUREMENT, ceiling_gflops=MEASUREMENT, ceiling_fraction=MEASUREMENT, utilization=OBJECT,
    throttled=BOOL, throttle_reasons=ListOf(STRING),
    energy_j_per_step=MEASUREMENT, samples_per_joule=MEASUREMENT, energy_source=STRING,
    peak_memory_bytes=MapOf(MEASUREMENT),
    memory=Fields(allocator_peak_bytes=MEASUREMENT, process_peak_bytes=MEASUREMENT,
                  device_used_peak_bytes=MEASUREMENT, process_peak_source=STRING, process_peak_why=STRING,
                  device_used_why=STRING),
    estimated_memory_bytes=OBJECT,
    final_loss=NUMBER, eval_loss=NUMBER, eval_accuracy=MEASUREMENT, skipped_steps=MEASUREMENT,
    estimated_time=Fields(seconds=MEASUREMENT, flops_per_step=MEASUREMENT, steps=MEASUREMENT,
                          repeats=MEASUREMENT, assumed_mfu=MEASUREMENT, rate_tflops=MEASUREMENT,
                          step_seconds=MEASUREMENT, memory_bytes_per_step=MEASUREMENT, bandwidth_tbs=MEASUREMENT,
                          basis=STRING, device=STRING, source=STRING, why=STRING),
    measured_time_s=MEASUREMENT, measured_from_step=ListOf(MEASUREMENT),
    noise=Fields(cv=MEASUREMENT, robust_cv=MEASUREMENT, p90_over_median=MEASUREMENT, outlier_steps=MEASUREMENT,
                 samples=MEASUREMENT, noisy=BOOL, reasons=ListOf(STRING), outlier_rule=STRING))

# Every field the scripts read, with its type; the runner's writer is runner/results/results.cpp.
CELL_FIELDS = Fields(
    schema=STRING, experiment=STRING, run_id=STRING, cell_id=STRING, slug=STRING,
    axes=MapOf(STRING), is_baseline=BOOL,
    config=Fields(batch_size=MEASUREMENT, warmup_steps=MEASUREMENT, steps=MEASUREMENT, repeats=MEASUREMENT,
                  model=OBJECT, data=OBJECT, optimizer=OBJECT),
    config_hash=STRING,
    device=Fields(kind=STRING, name=STRING, emulated=ANY, gpu=OBJECT, ceiling_gflops=MEASUREMENT),
    precision=OBJECT, gemm_math=OBJECT, testing=OBJECT,
    flops_per_step=MEASUREMENT,
    repeats=NonEmptyListOf(_REPEAT),
    summary=_SUMMARY)


_LOAD_SAMPLE = Fields(loadavg=ListOf(MEASUREMENT), other_cpu_fraction=MEASUREMENT, steal_fraction=MEASUREMENT,
                      busy=BOOL, round=MEASUREMENT)

# The manifest's fields the scripts read (runner/results/manifest.cpp, run_experiment.cpp, merge.cpp write them).
MANIFEST_FIELDS = Fields(
    schema=STRING, experiment=STRING, run_id=STRING, config_path=STRING, config_hash=STRING,
    started=STRING, finished=STRING, mpbench_version=STRING, git_commit=STRING,
    machine=OBJECT, compiler=ANY, libraries=OBJECT,
    device=Fields(kind=STRING, name=STRING, gpu=OBJECT, cpu_kernels=OBJECT, ceiling_gflops=ANY),
    cells=ListOf(STRING), cell_config_hashes=MapOf(STRING),
    git=OBJECT, build=OBJECT, environment=OBJECT,
    order=Fields(mode=STRING, seed=ANY, rounds=ListOf(ListOf(STRING))),
    noise=Fields(before=_LOAD_SAMPLE, rounds=ListOf(_LOAD_SAMPLE), busy=BOOL, warnings=ListOf(STRING)),
    shard=OBJECT, shards=LIST, merged=OBJECT, testing=OBJECT, failed_cells=ANY, stopped=ANY,
    vocabulary=Fields(schema=STRING, precisions=ListOf(STRING), memory_categories=ListOf(STRING),
                      axes=ListOf(STRING)))


# Python's json reads a 400-digit integer exactly; every reader turns it into a float.
_FLOAT_LIMIT = 2 ** 1024


def _check_finite(data):
    """Raise FieldError for the first NaN/inf number anywhere in `data` (iterative: no depth limit)."""
    stack = [("", data)]
    while stack:
        field, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise FieldError(field or "(top level)", "a finite number or null", value)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _FLOAT_LIMIT:
            raise FieldError(field or "(top level)", "a number a float can hold (|x| < 1.8e308)", value)
        if isinstance(value, dict):
            stack.extend((f"{field}.{k}" if field else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{field}[{i}]", v) for i, v in enumerate(value))


def check_cell_fields(data):
    """Check a parsed cell file (a dict) against the rules above; raises FieldError."""
    _check_finite(data)
    CELL_FIELDS.check("", data)


def check_manifest_fields(data):
    """Check a parsed manifest.json (a dict) against the rules above; raises FieldError."""
    _check_finite(data)
    MANIFEST_FIELDS.check("", data)
