"""core/fp8.h against ml_dtypes (PyPI ml-dtypes): float8_e4m3fn, float8_e5m2.

An implementation independent of ours (Google's, used by JAX and XLA). The
C++ side runs through tests/numerics/fp8_codes (MPB_FP8_CODES). Compared bit
for bit: all 256 codes decoded; encoding of every decoded value, every
midpoint and the float32 neighbours of both, specials, and 2 million random
float32 patterns. ml_dtypes' casts are the non-saturating ones (E4M3 overflow
-> NaN, E5M2 overflow -> inf); the saturating mode is checked against
ml_dtypes applied to the input clipped to +-max (np.clip keeps NaN), which is
what saturation means: clipping first changes only values that would round
beyond max, and those become max.

Skips (exit 77) with the reason when ml_dtypes is not installed: it never
passes without comparing.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import ml_dtypes
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIPPED: ml_dtypes is not importable ({e}); install it with "
          "`python3 -m pip install --break-system-packages --no-deps ml-dtypes==0.5.4` "
          "(scripts/install_deps.sh does)")
    sys.exit(77)

TOOL = os.environ.get("MPB_FP8_CODES")
FORMATS = [("E4M3", ml_dtypes.float8_e4m3fn, 448.0), ("E5M2", ml_dtypes.float8_e5m2, 57344.0)]


def run_decode(tmp):
    path = os.path.join(tmp, "decoded.f32")
    subprocess.run([TOOL, "decode", path], check=True)
    return np.fromfile(path, dtype=np.float32).reshape(2, 256)


def run_encode(tmp, x):
    src, dst = os.path.join(tmp, "in.f32"), os.path.join(tmp, "out.u8")
    x.astype("<f4").tofile(src)
    subprocess.run([TOOL, "encode", src, dst], check=True)
    return np.fromfile(dst, dtype=np.uint8).reshape(-1, 4)


def inputs():
    rng = np.random.default_rng(0xF8)
    parts = []
    for _, dt, _ in FORMATS:
        vals = np.arange(256, dtype=np.uint8).view(dt).astype(np.float64)
        fin = np.unique(np.abs(vals[np.isfinite(vals)]))
        mids = (fin[:-1] + fin[1:]) / 2
        # The overflow boundary: halfway between max and the next exponent step.
        top = fin[-1] + (fin[-1] - fin[-2]) / 2
        base = np.concatenate([fin, mids, [top]]).astype(np.float32)
        assert np.all(base.astype(np.float64) == np.concatenate([fin, mids, [top]])), "midpoints are exact in fp32"
        for v in (base, np.nextafter(base, np.float32(0)), np.nextafter(base, np.float32(np.inf))):
            parts += [v, -v]
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30], dtype=np.float32)
    rand_bits = rng.integers(0, 2**32, size=1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # Exponents 2^-31 .. 2^23: below E5M2's subnormals to beyond both maxima.
    near = (rng.standard_normal(1_000_000) * np.exp2(rng.integers(-31, 24, size=1_000_000))).astype(np.float32)
    return np.concatenate(parts + [specials, rand_bits, near])


def compare(name, got, want, x):
    want = want.view(np.uint8)
    # NaN inputs: both must give a NaN code of the input's sign. (The one
    # payload bit E5M2 can keep is our rule, not a spec requirement.)
    nan_in = np.isnan(x)
    got_nan = np.isnan(got[nan_in].view(FORMAT_OF[name]).astype(np.float32))
    want_nan = np.isnan(want[nan_in].view(FORMAT_OF[name]).astype(np.float32))
    bad = 0
    if not (got_nan.all() and want_nan.all() and np.array_equal(got[nan_in] & 0x80, want[nan_in] & 0x80)):
        print(f"FAIL {name}: NaN inputs do not give signed NaN codes on both sides")
        bad += 1
    diff = np.nonzero((got != want) & ~nan_in)[0]
    if diff.size:
        print(f"FAIL {name}: {diff.size} of {x.size} inputs differ, e.g.")
        for i in diff[:10]:
            print(f"  x={x[i]!r} (0x{x[i:i+1].view(np.uint32)[0]:08x}): ours 0x{got[i]:02x}, ml_dtypes 0x{want[i]:02x}")
        bad += 1
    return bad


FORMAT_OF = {}


def main():
    if not TOOL or not os.path.exists(TOOL):
        print("FAIL: MPB_FP8_CODES does not name the built fp8_codes tool")
        return 1
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        decoded = run_decode(tmp)
        for row, (name, dt, _) in enumerate(FORMATS):
            want = np.arange(256, dtype=np.uint8).view(dt).astype(np.float32)
            got = decoded[row]
            same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
            if not same.all():
                print(f"FAIL decode {name}: codes {np.nonzero(~same)[0].tolist()} differ")
                failures += 1
        x = inputs()
        np.seterr(invalid="ignore")  # NaN inputs: the casts warn, the NaN check below decides
        codes = run_encode(tmp, x)
        for k, (name, dt, fmax) in enumerate(FORMATS):
            FORMAT_OF[name] = dt
            FORMAT_OF[name + " saturating"] = dt
            failures += compare(name, codes[:, 2 * k], x.astype(dt), x)
            failures += compare(name + " saturating", codes[:, 2 * k + 1], np.clip(x, -fmax, fmax).astype(dt), x)
    print(f"ml_dtypes {ml_dtypes.__version__}: {x.size} float32 inputs x 4 conversions, 512 decodes; "
          f"{'all identical' if not failures else str(failures) + ' comparison(s) failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
