"""Which parts of the environment two result sets were measured in differ.

Why a module of its own: a speed or loss change between two sets means
something only next to what else changed between them -- the machine, the CPU
governor, a library, the compiler and its flags, the commit, an environment
variable that changes GEMM math (manifest.json: docs/RESULTS.md). compare.py
names every such field; this module decides which fields those are and how
two manifests' values of them compare, on manifests alone.

A field neither manifest has is skipped (both runners predate it); a field only
one has is a difference ("not recorded" on the other side): an older runner
cannot vouch that nothing changed.
"""

# (group, dotted manifest key), in the order they are reported. Groups:
# machine (hardware and OS), gpu (the GPU's card, modes, clocks and links from
# NVML, and --lock-clocks), governor (CPU frequency policy), libraries,
# compiler (and build flags), git, overrides (environment variables).
# machine.cpu_clocks.mhz is left out on purpose: it is an idle snapshot that
# differs between any two runs; the governor is what decides the clock under load.
FIXED_FIELDS = (
    ("machine", "device.kind"),
    ("machine", "device.name"),
    ("machine", "device.gpu.name"),
    ("machine", "device.gpu.compute_capability"),
    ("machine", "device.gpu.memory_bytes"),
    ("machine", "device.cpu_kernels.isa"),
    ("machine", "device.cpu_kernels.gemm"),
    ("gpu", "device.gpu.nvml.uuid"),
    ("gpu", "device.gpu.nvml.vbios"),
    ("gpu", "device.gpu.nvml.ecc.current"),
    ("gpu", "device.gpu.nvml.mig.current"),
    ("gpu", "device.gpu.nvml.persistence_mode"),
    ("gpu", "device.gpu.nvml.applications_clocks_mhz.sm"),
    ("gpu", "device.gpu.nvml.applications_clocks_mhz.mem"),
    ("gpu", "device.gpu.nvml.pcie.generation"),
    ("gpu", "device.gpu.nvml.pcie.width"),
    ("gpu", "device.gpu.nvml.nvlink_active_links"),
    ("gpu", "device.clock_lock.requested"),
    ("machine", "machine.hostname"),
    ("machine", "machine.cpu_model"),
    ("machine", "machine.cores"),
    ("machine", "machine.cpu_flags"),
    ("machine", "machine.memory_bytes"),
    ("machine", "machine.os"),
    ("machine", "machine.kernel"),
    ("governor", "machine.cpu_clocks.governor"),
    ("compiler", "compiler"),
    ("compiler", "build.type"),
    ("compiler", "build.cxx_flags"),
    ("compiler", "build.options"),
    ("compiler", "build.compiled_with"),
    ("git", "git_commit"),
    ("git", "git.dirty"),
)
GROUPS = ("machine", "gpu", "governor", "libraries", "compiler", "git", "overrides")

_MISSING = object()   # the key is absent (not the same as a JSON null: "recorded as unknown")


def _get(manifest, key):
    """The value at a dotted key; None under a null parent (device.gpu on a CPU run: recorded as none)."""
    node = manifest
    for part in key.split("."):
        if node is None:
            return None
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _keys_under(manifests, key):
    """Sorted union of the keys of the object at `key` in each manifest."""
    names = set()
    for m in manifests:
        node = _get(m, key)
        if isinstance(node, dict):
            names.update(node)
    return sorted(names)


def _fields(base, new):
    """Every (group, key) to compare, with how a missing value reads."""
    fields = [(group, key, "not recorded") for group, key in FIXED_FIELDS]
    fields += [("libraries", "libraries." + name, "not recorded") for name in _keys_under((base, new), "libraries")]
    both_record_overrides = all(isinstance(_get(m, "environment.overrides"), dict) for m in (base, new))
    if both_record_overrides:
        # Both runners looked: a variable absent on one side was not set there.
        fields += [("overrides", "environment.overrides." + name, "not set")
                   for name in _keys_under((base, new), "environment.overrides")]
    else:
        fields.append(("overrides", "environment.overrides", "not recorded"))
    return fields


def environment_differences(base, new):
    """The fields whose values differ between two manifests (dicts), in report order.

    Each difference: {"group", "field", "base", "new"}; a side that lacks the field
    has None there and its reason in "base_missing"/"new_missing" ("not recorded":
    an older runner; "not set": an environment variable the other run had).
    """
    out = []
    for group, key, missing_reads in _fields(base, new):
        b, n = _get(base, key), _get(new, key)
        if b is _MISSING and n is _MISSING:
            continue
        if b == n:
            continue
        d = {"group": group, "field": key,
             "base": None if b is _MISSING else b, "new": None if n is _MISSING else n}
        if b is _MISSING:
            d["base_missing"] = missing_reads
        if n is _MISSING:
            d["new_missing"] = missing_reads
        out.append(d)
    return out


def value_text(value, missing=None):
    """A manifest value for one line of text."""
    if missing:
        return f"({missing})"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return " ".join(str(v) for v in value) or "[]"
    if isinstance(value, dict):
        return ", ".join(f"{k}={value_text(v)}" for k, v in sorted(value.items())) or "{}"
    return str(value)


def environment_text(differences):
    """The text section compare.py prints: one line per differing field, or one line saying none differ."""
    if not differences:
        return "Environment: the same in both sets (" + ", ".join(GROUPS) + ")"
    width = max(len(d["field"]) for d in differences)
    lines = [f"Environment differences, BASE -> NEW ({len(differences)}):"]
    for d in differences:
        lines.append(f"  {d['group']:<9} {d['field']:<{width}}  "
                     f"{value_text(d['base'], d.get('base_missing'))} -> {value_text(d['new'], d.get('new_missing'))}")
    return "\n".join(lines)
