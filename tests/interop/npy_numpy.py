#!/usr/bin/env python3
"""NumPy interoperability of vtrun's .npy files, run by ctest with Debian's python3-numpy.

For every dtype vtrun supports: a file written by vtrun must be byte-identical to numpy.save
of the same array, and a file written by NumPy must load in vtrun bit for bit (checked by
having vtrun save it again and comparing bytes). Exits 77 (skipped) without NumPy.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy not installed; skipping")
    sys.exit(77)

VTRUN = sys.argv[1]
DTYPES = ["float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"]
SHAPES = [(), (0,), (5,), (2, 3), (3, 1, 4), (1, 2, 3, 2)]


def run_vtrun(code):
    subprocess.run([VTRUN, "-e", code], check=True)


def sample(dtype, shape, rng):
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith("float"):
        values = rng.standard_normal(size=shape) * 100
        return values.astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def main():
    rng = np.random.default_rng(12345)
    failures = 0
    checks = 0
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in DTYPES:
            for shape in SHAPES:
                array = sample(dtype, shape, rng)
                from_numpy = os.path.join(tmp, "numpy.npy")
                from_vtrun = os.path.join(tmp, "vtrun.npy")
                np.save(from_numpy, array)
                # NumPy -> vtrun -> file: vtrun's copy must equal NumPy's bytes exactly.
                run_vtrun(f"vt.tensor.load({from_numpy!r}):save({from_vtrun!r})")
                same = open(from_numpy, "rb").read() == open(from_vtrun, "rb").read()
                back = np.load(from_vtrun)
                same = same and back.dtype == array.dtype and back.shape == array.shape
                same = same and back.tobytes() == array.tobytes()
                checks += 1
                if not same:
                    failures += 1
                    print(f"FAIL {dtype} {shape}: vtrun's file differs from numpy.save's")
                else:
                    print(f"ok   {dtype} {shape}")
    print(f"{checks - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
