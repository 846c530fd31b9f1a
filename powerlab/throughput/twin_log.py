"""The synthetic twin's training log (:mod:`powerlab.throughput.synth`): run segments
between failures, and the per-step log in which the job waits for its slowest GPU, with
warm-up, checkpoint and evaluation steps, AR(1) noise and a level per segment.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import signal

from ..exceptions import ScenarioError
from ..telemetry.timeutil import to_utc
from .twin_physics import StateTable, TwinParameters

__all__ = ["build_steps", "interp_rows", "run_segments"]


def run_segments(t0_ns: int, t1_ns: int, p: TwinParameters, rng, restarts):
    """(start_ns, end_ns) of each run segment: between Poisson failures (mean ``mtbf_s``)
    or the given restart times, each followed by ``downtime_s``; segments shorter than ten
    steps are dropped."""
    segs = []
    s = t0_ns
    if restarts is None:
        while s < t1_ns:
            fail = s + int(rng.exponential(p.mtbf_s) * 1e9)
            e = min(fail, t1_ns)
            segs.append((s, e))
            s = e + int(p.downtime_s * rng.uniform(0.5, 1.5) * 1e9)
    else:
        bounds = []
        for r in restarts:
            ts = to_utc(r, what="restart time",
                        error=lambda msg: ScenarioError(msg, key="restarts"))
            bounds.append(int(ts.as_unit("ns").value))
        bounds.sort()
        for b in bounds:
            if b <= s or b >= t1_ns:
                continue
            segs.append((s, b))
            s = b + int(p.downtime_s * 1e9)
        if s < t1_ns:
            segs.append((s, t1_ns))
    return [(a, b) for a, b in segs if b - a > 10 * p.step_time_s * 1e9]


def interp_rows(t_ns: np.ndarray, g0: int, dt_ns: int, arr: np.ndarray) -> np.ndarray:
    """Linear interpolation of grid rows ``arr`` (n_t, ...) at times ``t_ns``."""
    x = (t_ns - g0) / dt_ns
    i = np.clip(np.floor(x).astype(np.int64), 0, len(arr) - 2)
    w = np.clip(x - i, 0.0, 1.0)
    if arr.ndim == 1:
        return arr[i] * (1 - w) + arr[i + 1] * w
    return arr[i] * (1 - w)[:, None] + arr[i + 1] * w[:, None]


def build_steps(segs, inlet, table: StateTable, g0, dt_ns, p: TwinParameters, rng):
    """The training log of the run segments ``segs`` at inlet temperature ``inlet`` (on
    the grid from ``g0`` every ``dt_ns``); returns (frame, noise-free throughput, step
    mid-times [ns])."""
    frames, det_all, mid_all = [], [], []
    last_ckpt = 0
    phi = np.exp(-p.step_time_s / p.noise_corr_s) if p.noise_corr_s > 0 else 0.0
    sd = p.noise_pct / 100.0
    jit = p.jitter_pct / 100.0
    for j, (a, b) in enumerate(segs):
        n_max = int((b - a) / 1e9 / (p.step_time_s * 0.95)) + 5
        k = np.arange(n_max)
        step_no = last_ckpt + 1 + k
        extra = np.zeros(n_max)
        extra[0] += p.startup_s
        warm = (p.warmup_extra * np.exp(-k / p.warmup_steps) if p.warmup_steps > 0
                else np.zeros(n_max))
        is_ckpt = (step_no % int(p.checkpoint_every) == 0) if p.checkpoint_every else k < 0
        is_eval = (step_no % int(p.eval_every) == 0) if p.eval_every else k < 0
        extra += np.where(is_ckpt, p.checkpoint_s, 0.0) + np.where(is_eval, p.eval_s, 0.0)
        level = 1.0 + p.segment_level_pct / 100.0 * rng.standard_normal()
        e = rng.standard_normal(n_max) * sd * np.sqrt(1 - phi**2)
        x0 = rng.standard_normal() * sd
        ar, _ = signal.lfilter([1.0], [1.0, -phi], e, zi=[phi * x0])
        # fixed-point timeline: step durations depend on when the steps run
        dur = np.full(n_max, p.step_time_s * 1.03) * (1 + warm) + extra
        for _ in range(2):
            end = a + np.cumsum(dur) * 1e9
            mid = end - 0.5e9 * dur
            base = table.rows(table.job_step, interp_rows(mid, g0, dt_ns, inlet))
            dur = base * level * (1 + warm) * (1 + ar) + extra
        end = a + np.cumsum(dur) * 1e9
        n = int(np.searchsorted(end, b, side="right"))
        mid = (end - 0.5e9 * dur)[:n]
        inlet_s = interp_rows(mid, g0, dt_ns, inlet)
        # the job waits for the slowest GPU at every step (per-GPU jitter included)
        slowest = np.empty(n)
        for c0 in range(0, n, 16384):
            c1 = min(n, c0 + 16384)
            dg = table.rows(table.step, inlet_s[c0:c1])
            z = rng.standard_normal(dg.shape, dtype=np.float32)
            slowest[c0:c1] = (dg * (1 + jit * z)).max(axis=1)
        det = table.rows(table.job_step, inlet_s)
        dur = slowest * level * (1 + warm[:n]) * (1 + ar[:n]) + extra[:n]
        end = a + np.cumsum(dur) * 1e9
        n = int(np.searchsorted(end, b, side="right"))
        phase = np.full(n, "train", dtype=object)
        phase[(k[:n] < 5 * p.warmup_steps) | (k[:n] == 0)] = "warmup"
        phase[is_ckpt[:n]] = "checkpoint"
        phase[is_eval[:n]] = "eval"
        frames.append(pd.DataFrame({
            "timestamp": pd.DatetimeIndex(end[:n].astype(np.int64), tz="UTC").as_unit("ns"),
            "step": step_no[:n].astype(np.int64),
            "segment": np.full(n, j, dtype=np.int64),
            "phase": pd.array(phase.astype(str), dtype="string"),
            "duration_s": dur[:n],
            "throughput_tokens_per_s": p.tokens_per_step / dur[:n],
        }))
        det_all.append(p.tokens_per_step / det[:n])   # the physical effect, no level
        mid_all.append((end[:n] - 0.5e9 * dur[:n]).astype(np.int64))
        ck = step_no[:n][is_ckpt[:n]]
        last_ckpt = int(ck[-1]) if len(ck) else last_ckpt
    steps = pd.concat(frames, ignore_index=True)
    return steps, np.concatenate(det_all), np.concatenate(mid_all)
