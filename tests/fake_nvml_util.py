"""Test helpers for the fake NVML library (``tests/fake_nvml/fake_nvml.c``).

* :func:`build_fake_nvml` compiles the fake ``libnvidia-ml.so.1`` with the system C compiler
  into ``tests/_build/fake_nvml/`` (git-ignored), once per source change.
* :func:`write_scenario` writes a scenario file; :func:`fake_env` gives the environment for a
  subprocess (``LD_LIBRARY_PATH`` + ``FAKE_NVML_SCENARIO``) in which the real pynvml bindings
  load the fake; :func:`use_in_process` loads it into the running interpreter instead (the
  dynamic loader then resolves pynvml's ``CDLL("libnvidia-ml.so.1")`` to it by soname).
* :class:`Wave` and :func:`energy_mj` are a Python model of the fake's waveform rules, so
  tests can compute the exact value the fake returned at any time.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fake_nvml" / "fake_nvml.c"
BUILD_DIR = HERE / "_build" / "fake_nvml"
LIBNAME = "libnvidia-ml.so.1"
REPO = HERE.parent


def build_fake_nvml(build_dir: Path = BUILD_DIR) -> Path:
    """Compile the fake library (when missing or older than its source); return its folder.

    Skips the calling test when no C compiler is found.
    """
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    lib = build_dir / LIBNAME
    if lib.exists() and lib.stat().st_mtime >= SOURCE.stat().st_mtime:
        return build_dir
    if cc is None:
        pytest.skip("no C compiler (cc) to build the fake NVML library")
    build_dir.mkdir(parents=True, exist_ok=True)
    tmp = build_dir / f".{LIBNAME}.{uuid.uuid4().hex}"
    cmd = [cc, "-shared", "-fPIC", "-O2", "-Wall", f"-Wl,-soname,{LIBNAME}", "-o", str(tmp),
           str(SOURCE), "-lpthread"]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"building the fake NVML library failed:\n{res.stderr}")
    os.replace(tmp, lib)
    return build_dir


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


def write_scenario(path: Path, lines: dict[str, object] | list[str],
                   stamp: bool = True) -> Path:
    """Write a scenario file; ``lines`` maps keys to values (order kept).

    With ``stamp`` the fake writes its init time to ``<path>.init``
    (read it with :func:`init_time_us`).
    """
    path = Path(path)
    items = list(lines.items()) if isinstance(lines, dict) else [
        tuple(s.split("=", 1)) for s in lines]
    text = "".join(f"{k.strip()} = {str(v).strip()}\n" for k, v in items)
    if stamp:
        text += f"init_stamp_file = {path}.init\n"
    path.write_text(text)
    return path


def init_time_us(scenario: Path) -> int:
    """The fake's init time [us since epoch], written at its last nvmlInit."""
    return int(Path(f"{scenario}.init").read_text().strip())


def fake_env(libdir: Path, scenario: Path | None, base: dict | None = None) -> dict:
    """Environment for a subprocess whose pynvml loads the fake library."""
    env = dict(os.environ if base is None else base)
    env["LD_LIBRARY_PATH"] = str(libdir) + (
        os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if scenario is not None:
        env["FAKE_NVML_SCENARIO"] = str(scenario)
    env.setdefault("PYTHONPATH", str(REPO))
    return env


_IN_PROCESS: ctypes.CDLL | None = None


def use_in_process(libdir: Path) -> ctypes.CDLL:
    """Load the fake into this interpreter so that pynvml's loader finds it by soname.

    A real NVML library already loaded in this process would win; then the test skips.
    """
    global _IN_PROCESS
    if _IN_PROCESS is None:
        _IN_PROCESS = ctypes.CDLL(str(libdir / LIBNAME), mode=ctypes.RTLD_GLOBAL)
    probe = ctypes.CDLL(LIBNAME)
    if not hasattr(probe, "nvmlDeviceGetFieldValues") or probe._handle != _IN_PROCESS._handle:
        pytest.skip("another libnvidia-ml.so.1 is loaded in this process")
    return _IN_PROCESS


def python_cmd(*args: str) -> list[str]:
    return [sys.executable, *args]


# ---------------------------------------------------------------- the reference model


def _sec_to_us(s: str) -> int:
    x = float(s)
    return int(x * 1e6 + (0.5 if x >= 0 else -0.5))


@dataclass(frozen=True)
class Wave:
    """A piecewise-constant waveform in the fake's syntax (``"T:V T:V @PERIOD"``)."""

    times_us: tuple[int, ...]
    values: tuple[int, ...]
    period_us: int = 0

    @classmethod
    def parse(cls, spec: str | int) -> Wave:
        spec = str(spec).strip()
        if ":" not in spec:
            return cls((0,), (int(spec, 0),), 0)
        period = 0
        if "@" in spec:
            spec, p = spec.split("@", 1)
            period = _sec_to_us(p)
        ts, vs = [], []
        for tok in spec.replace(",", " ").split():
            t, v = tok.split(":")
            ts.append(_sec_to_us(t))
            vs.append(int(v, 0))
        return cls(tuple(ts), tuple(vs), period)

    def at(self, t_us: int) -> int:
        tt = t_us % self.period_us if self.period_us > 0 else t_us
        k = 0
        for i, t in enumerate(self.times_us):
            if t <= tt:
                k = i
            else:
                break
        return self.values[k]

    def breakpoints(self, until_us: int) -> list[int]:
        """Every time [us since init] up to ``until_us`` where the value may change."""
        if self.period_us <= 0:
            return list(self.times_us)
        out = []
        base = 0
        while base <= until_us:
            out.extend(base + t for t in self.times_us)
            base += self.period_us
        return out

    def values_between(self, t0_us: int, t1_us: int) -> list[int]:
        """Every value the wave takes in ``[t0_us, t1_us]`` (what a call spanning that
        window may have read), sorted."""
        vals = {self.at(t0_us)}
        vals.update(self.at(b) for b in self.breakpoints(t1_us) if t0_us < b <= t1_us)
        return sorted(vals)


#: Quantities the collector reads with individual NVML calls: (column, scenario key,
#: scale from the scenario's unit to the column's; None: raw bitmask).
CALL_COLUMNS = (("temp_gpu_c", "temp_gpu_c", 1), ("clock_sm_mhz", "clock_sm_mhz", 1),
                ("clock_mem_mhz", "clock_mem_mhz", 1), ("util_gpu_pct", "util_gpu_pct", 1),
                ("util_mem_pct", "util_mem_pct", 1), ("power_limit_w", "power_limit_mw", 1e-3),
                ("throttle_reasons", "throttle", None))


def energy_mj(power: Wave, t_us: int, energy0_mj: int = 1_000_000, step_us: int = 100_000,
              scale_pct: int = 100, reset_us: int | None = None) -> int:
    """The fake's energy counter [mJ] at ``t_us`` since init (exact integer model)."""
    k = t_us // step_us
    total = sum(power.at(j * step_us) * step_us // 1_000_000 for j in range(k))
    if reset_us is not None and t_us >= reset_us:
        before = sum(power.at(j * step_us) * step_us // 1_000_000
                     for j in range(reset_us // step_us))
        return (total - before) * scale_pct // 100
    return energy0_mj + total * scale_pct // 100


# ---------------------------------------------------------------- scenarios and fixtures

#: The fake's per-GPU defaults (keep in step with defaults() in fake_nvml.c).
DEFAULTS = {
    "power_mw": "300000", "power_avg_mw": "300000", "temp_gpu_c": "45", "temp_mem_c": "50",
    "clock_sm_mhz": "1980", "clock_mem_mhz": "2619", "util_gpu_pct": "100",
    "util_mem_pct": "40", "power_limit_mw": "700000", "throttle": "0",
    "energy0_mj": "1000000", "energy_scale_pct": "100", "tdp_mw": "700000",
}


@dataclass
class FakeScenario:
    """A loaded scenario: its file, the fake's init time and a model of its values."""

    path: Path
    init_us: int
    spec: dict

    def key(self, gpu: int, name: str) -> str:
        for k in (f"gpu{gpu}.{name}", f"gpu*.{name}"):
            if k in self.spec:
                return str(self.spec[k])
        return DEFAULTS[name]

    def wave(self, gpu: int, name: str) -> Wave:
        return Wave.parse(self.key(gpu, name))

    @property
    def step_us(self) -> int:
        return _sec_to_us(str(self.spec.get("energy_step_s", "0.1")))

    def energy_mj(self, gpu: int, t_us: int) -> int:
        reset = self.spec.get(f"gpu{gpu}.energy_reset_s", self.spec.get("gpu*.energy_reset_s"))
        return energy_mj(self.wave(gpu, "power_mw"), t_us, int(self.key(gpu, "energy0_mj")),
                         self.step_us, int(self.key(gpu, "energy_scale_pct")),
                         None if reset is None else round(float(reset) * 1e6))

    def uuid(self, gpu: int) -> str:
        return str(self.spec.get(f"gpu{gpu}.uuid", f"GPU-fa6e0000-0000-4000-8000-{gpu:012d}"))


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

    use_in_process(fake_libdir)
    count = [0]

    def load(spec: dict, init: bool = True) -> FakeScenario:
        count[0] += 1
        path = write_scenario(tmp_path / f"scenario{count[0]}.txt", spec)
        monkeypatch.setenv("FAKE_NVML_SCENARIO", str(path))
        nvml.shutdown()
        if not init:
            return FakeScenario(path, 0, dict(spec))
        nvml.init()
        return FakeScenario(path, init_time_us(path), dict(spec))

    yield load
    nvml.shutdown()
