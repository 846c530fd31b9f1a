"""Check that the main records (``baseline=False``) of the three fleet generators are
byte-identical to a reference git revision (default: 9f9fb17, the last commit before the
baseline records were added).

For every generator, every case, seeds 0 and 1 and two small shapes, the reference
module (read with ``git show REV:tests/fleetgens/fleetgen_X.py``) and the module in this
folder are run; the frames must give the same SHA-256 of their Parquet bytes, the same
``pd.util.hash_pandas_object`` sum, be exactly equal (``assert_frame_equal`` with
``check_exact=True``), and the truth dicts must be equal (``==`` and ``repr``).

Run from the repository root::

    python tests/fleetgens/check_unchanged.py [REV]

Exit status 0 when everything is identical, 1 otherwise.
"""
from __future__ import annotations

import hashlib
import importlib.util
import io
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
REF_REV = "9f9fb17"
SEEDS = (0, 1)
SHAPES = (dict(hours=12.0, n_hosts=4, gpus_per_host=4),
          dict(hours=6.0, n_hosts=3, gpus_per_host=8, interval_s=300.0))


def _load_current(letter: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"fleetgen_{letter}_cur",
                                                  HERE / f"fleetgen_{letter}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _load_ref(letter: str, rev: str) -> types.ModuleType:
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:tests/fleetgens/fleetgen_{letter}.py"],
                         check=True, capture_output=True, text=True).stdout
    mod = types.ModuleType(f"fleetgen_{letter}_ref")
    exec(compile(src, f"{rev}:fleetgen_{letter}.py", "exec"), mod.__dict__)
    return mod


def _digest(df: pd.DataFrame) -> tuple[str, int]:
    buf = io.BytesIO()
    df.to_parquet(buf, index=True)
    return (hashlib.sha256(buf.getvalue()).hexdigest(),
            int(pd.util.hash_pandas_object(df, index=True).sum()))


CASES = ("clean", "clean_hot_host", "gpu_thermal", "gpu_throttle_bits", "gpu_power_limit",
         "gpu_low_clock", "host_slow", "intermittent", "silent_from_start")


def main(rev: str = REF_REV) -> int:
    warnings.simplefilter("ignore")
    bad = 0
    n = 0
    for letter in "ABC":
        ref, cur = _load_ref(letter, rev), _load_current(letter)
        for case in CASES:
            for seed in SEEDS:
                for shape in SHAPES:
                    d0, t0 = ref.generate(seed, case, **shape)
                    d1, t1 = cur.generate(seed, case, **shape)
                    h0, h1 = _digest(d0), _digest(d1)
                    ok = h0 == h1 and t0 == t1 and repr(t0) == repr(t1)
                    try:
                        pd.testing.assert_frame_equal(d0, d1, check_exact=True)
                    except AssertionError:
                        ok = False
                    n += 1
                    if not ok:
                        bad += 1
                        print(f"DIFFERENT {letter} {case} seed={seed} {shape}")
        print(f"fleetgen_{letter}: {len(CASES) * len(SEEDS) * len(SHAPES)} records compared "
              f"against {rev}")
    print(f"{n - bad}/{n} main records byte-identical (parquet sha256, hash_pandas_object, "
          f"exact frame, truth)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
