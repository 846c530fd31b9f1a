"""A simulated NVML library for demos, notebooks, tests and benchmarks without a GPU.

``fake_nvml.c`` (shipped beside this module) is a small C library that exports the NVML
symbols powerlab uses under the soname ``libnvidia-ml.so.1``; the real ``pynvml`` bindings
load it instead of NVIDIA's and it answers from a scenario file (waveforms of power,
temperatures, clocks..., faults; the syntax is documented at the top of the C source).

* :func:`build_fake_nvml` compiles it with the system C compiler into a cache folder
  (``$POWERLAB_CACHE`` or ``~/.cache/powerlab``), once per source change;
* :func:`write_scenario` writes a scenario file; :func:`fake_env` gives the environment
  for a subprocess (``LD_LIBRARY_PATH`` + ``FAKE_NVML_SCENARIO``) in which pynvml loads
  the fake, e.g. ``powerlab collect`` serving ``/metrics`` (notebook 07);
  :func:`use_in_process` loads it into the running interpreter instead;
* :class:`Wave`, :func:`energy_mj` and :class:`FakeScenario` model the fake's rules in
  Python, so a caller can compute the exact value the fake returned at any time.

Only the standard library is used here (no pynvml: :mod:`powerlab.collect.nvml` stays
the only NVML importer).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import PowerlabError
from ..outputs import atomic_write

__all__ = ["DEFAULTS", "LIBNAME", "SOURCE", "FakeScenario", "NoCompilerError", "Wave",
           "build_fake_nvml", "cache_dir", "energy_mj", "fake_env", "init_time_us",
           "use_in_process", "write_scenario"]

SOURCE = Path(__file__).resolve().parent / "fake_nvml.c"
LIBNAME = "libnvidia-ml.so.1"
#: The folder holding the ``powerlab`` package (for subprocesses run from a checkout).
_IMPORT_ROOT = Path(__file__).resolve().parents[2]


class NoCompilerError(PowerlabError):
    """No C compiler to build the simulated NVML library."""


def cache_dir() -> Path:
    """Where built helper libraries go: ``$POWERLAB_CACHE`` or ``~/.cache/powerlab``."""
    base = os.environ.get("POWERLAB_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "powerlab"


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def build_fake_nvml(build_dir: Path | None = None) -> Path:
    """Compile the fake library when missing or older than its source; return its folder.

    Parameters
    ----------
    build_dir : path-like, optional
        Output folder (default ``cache_dir() / "fake_nvml"``).

    Raises
    ------
    NoCompilerError
        No C compiler (``$CC``, ``cc`` or ``gcc``) was found.
    PowerlabError
        The compiler failed (its message is included).
    """
    build_dir = Path(build_dir) if build_dir is not None else cache_dir() / "fake_nvml"
    lib = build_dir / LIBNAME
    if lib.exists() and lib.stat().st_mtime >= SOURCE.stat().st_mtime:
        return build_dir
    cc = _compiler()
    if cc is None:
        raise NoCompilerError("no C compiler (cc or gcc) to build the simulated NVML "
                              "library; install one (Debian: apt-get install gcc)")

    def compile_to(tmp: Path) -> None:
        cmd = [cc, "-shared", "-fPIC", "-O2", "-Wall", f"-Wl,-soname,{LIBNAME}", "-o",
               str(tmp), str(SOURCE), "-lpthread"]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise PowerlabError(f"building the simulated NVML library failed:\n{res.stderr}")

    # atomic: concurrent builders never see half a library
    atomic_write(lib, compile_to, fsync=False)
    return build_dir


def write_scenario(path, lines: dict[str, object] | list[str], stamp: bool = True) -> Path:
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


def init_time_us(scenario) -> int:
    """The fake's init time [us since epoch], written at its last nvmlInit."""
    return int(Path(f"{scenario}.init").read_text().strip())


def fake_env(libdir, scenario, base: dict | None = None) -> dict:
    """Environment for a subprocess whose pynvml loads the fake library.

    ``PYTHONPATH`` gets the folder holding this ``powerlab`` (when not set), so a
    ``python -m powerlab.cli`` child imports the same package from a checkout too.
    """
    env = dict(os.environ if base is None else base)
    env["LD_LIBRARY_PATH"] = str(libdir) + (
        os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if scenario is not None:
        env["FAKE_NVML_SCENARIO"] = str(scenario)
    env.setdefault("PYTHONPATH", str(_IMPORT_ROOT))
    return env


_IN_PROCESS: ctypes.CDLL | None = None


def use_in_process(libdir) -> ctypes.CDLL:
    """Load the fake into this interpreter so that pynvml's loader finds it by soname.

    Raises
    ------
    PowerlabError
        Another ``libnvidia-ml.so.1`` (a real one) is already loaded in this process.
    """
    global _IN_PROCESS
    if _IN_PROCESS is None:
        _IN_PROCESS = ctypes.CDLL(str(Path(libdir) / LIBNAME), mode=ctypes.RTLD_GLOBAL)
    probe = ctypes.CDLL(LIBNAME)
    if not hasattr(probe, "nvmlDeviceGetFieldValues") or probe._handle != _IN_PROCESS._handle:
        raise PowerlabError("another libnvidia-ml.so.1 is loaded in this process")
    return _IN_PROCESS


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
