"""Test helpers for the simulated NVML library (:mod:`powerlab.collect.fake`, whose C
source ships in the package as ``powerlab/collect/fake_nvml.c``).

The library-side helpers live in the package, so notebooks and users run them from an
installed powerlab; here they are wrapped for pytest (a missing compiler or another loaded
NVML skips the test) and the fixtures are defined.  The tests build into
``tests/_build/fake_nvml/`` (git-ignored).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from powerlab.collect import fake as _fake
from powerlab.collect.fake import (  # noqa: F401  (re-exported for the tests)
    DEFAULTS,
    LIBNAME,
    SOURCE,
    FakeScenario,
    Wave,
    energy_mj,
    fake_env,
    init_time_us,
    write_scenario,
)
from powerlab.exceptions import PowerlabError

HERE = Path(__file__).resolve().parents[1]
BUILD_DIR = HERE / "_build" / "fake_nvml"
REPO = HERE.parent


def build_fake_nvml(build_dir: Path = BUILD_DIR) -> Path:
    """:func:`powerlab.collect.fake.build_fake_nvml` into the tests' build folder; skips
    the calling test when no C compiler is found."""
    try:
        return _fake.build_fake_nvml(build_dir)
    except _fake.NoCompilerError as exc:
        pytest.skip(str(exc))


SLOW_FSYNC_SOURCE = HERE / "fake_nvml" / "slow_fsync.c"


def build_slow_fsync(build_dir: Path = BUILD_DIR) -> Path:
    """Compile the slow-fsync ``LD_PRELOAD`` shim (``tests/fake_nvml/slow_fsync.c``);
    return the path of the shared library.  Skips the calling test without a C compiler."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    lib = build_dir / "libslow_fsync.so"
    if lib.exists() and lib.stat().st_mtime >= SLOW_FSYNC_SOURCE.stat().st_mtime:
        return lib
    if cc is None:
        pytest.skip("no C compiler (cc) to build the slow-fsync shim")
    build_dir.mkdir(parents=True, exist_ok=True)
    tmp = build_dir / f".libslow_fsync.so.{uuid.uuid4().hex}"
    res = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(tmp),
                          str(SLOW_FSYNC_SOURCE), "-ldl"], capture_output=True, text=True,
                         check=False)
    if res.returncode != 0:
        raise RuntimeError(f"building the slow-fsync shim failed:\n{res.stderr}")
    os.replace(tmp, lib)
    return lib


def use_in_process(libdir: Path):
    """:func:`powerlab.collect.fake.use_in_process`; skips when a real NVML is loaded."""
    try:
        return _fake.use_in_process(libdir)
    except PowerlabError as exc:
        pytest.skip(str(exc))


def python_cmd(*args: str) -> list[str]:
    return [sys.executable, *args]


#: Quantities the collector reads with individual NVML calls: (column, scenario key,
#: scale from the scenario's unit to the column's; None: raw bitmask).
CALL_COLUMNS = (("temp_gpu_c", "temp_gpu_c", 1), ("clock_sm_mhz", "clock_sm_mhz", 1),
                ("clock_mem_mhz", "clock_mem_mhz", 1), ("util_gpu_pct", "util_gpu_pct", 1),
                ("util_mem_pct", "util_mem_pct", 1), ("power_limit_w", "power_limit_mw", 1e-3),
                ("throttle_reasons", "throttle", None))



@pytest.fixture(scope="session")
def fake_libdir() -> Path:
    """Folder holding the freshly built fake libnvidia-ml.so.1."""
    return build_fake_nvml()


@pytest.fixture
def fake_nvml(fake_libdir, tmp_path, monkeypatch):
    """Load a scenario into the fake NVML inside this process: ``fake_nvml(spec)``.

    The real pynvml bindings load the fake (by soname); NVML is re-initialised so the fake
    reads the new scenario; returns a :class:`FakeScenario`.
    """
    from powerlab.collect import nvml

    lib = use_in_process(fake_libdir)
    count = [0]

    def load(spec: dict, init: bool = True) -> FakeScenario:
        count[0] += 1
        path = write_scenario(tmp_path / f"scenario{count[0]}.txt", spec)
        monkeypatch.setenv("FAKE_NVML_SCENARIO", str(path))
        nvml.shutdown()
        # the fake loads a scenario (and writes its init stamp) only at an init with no
        # other open: a thread an earlier test left behind (slow on a loaded machine)
        # may still hold NVML initialised, so every init is released first (issue 37)
        while lib.nvmlShutdown() == 0:
            pass
        if not init:
            return FakeScenario(path, 0, dict(spec))
        nvml.init()
        return FakeScenario(path, init_time_us(path), dict(spec))

    yield load
    nvml.shutdown()
