"""A power-capping campaign on the synthetic twin: the same job run under a sequence of
GPU power limits, one after the other, with telemetry and a training log.

This is the data a fleet records when an operator steps the power limit (for a
flexibility test or a demand-response event): :func:`powerlab.flex.curvefit.fit_curve`
learns the power-throughput curve from it, and the twin's own step times at other limits
are the truth the curve is checked against (the twin's physics, not the curve's formula:
:mod:`powerlab.throughput.synth`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..exceptions import PowerlabError
from ..telemetry.timeutil import to_utc
from ..throughput.synth import simulate_training

__all__ = ["twin_capping_campaign", "twin_step_time"]


def twin_capping_campaign(limits_w: Sequence[float], *, hours_each: float = 1.0,
                          rounds: int = 2, start="2025-06-03", seed: int = 0,
                          n_hosts: int = 1,
                          gpus_per_host: int = 4, telemetry_interval_s: float = 30.0,
                          **twin) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run the twin under each power limit in turn.

    Parameters
    ----------
    limits_w : sequence of float
        Power limits, in the order they are applied [W].
    hours_each : float
        Time under each limit in each round [h].
    rounds : int
        The sequence of limits is applied this many times (so that slow drifts do not
        line up with one limit).
    start : str or pandas.Timestamp
        Start of the campaign (a time without a zone is read as UTC).
    seed : int
        Seed; the run under the ``i``-th limit uses ``seed + i``.
    n_hosts, gpus_per_host : int
        Fleet shape.
    telemetry_interval_s : float
        Telemetry interval [s].
    **twin
        Further :class:`~powerlab.throughput.synth.TwinParameters` overrides.  The
        per-segment level (``segment_level_pct``) defaults to 0: a campaign steps the
        limit on one allocation, where no restart moves the job to other nodes.

    Returns
    -------
    telemetry, steps : pandas.DataFrame
        Canonical telemetry (with ``power_limit_w``) and the training log (with a
        ``power_limit_w`` column), one after the other in time.
    """
    if len(limits_w) == 0:
        raise PowerlabError("limits_w is empty")
    if rounds < 1:
        raise PowerlabError(f"rounds must be >= 1, got {rounds}")
    twin = {"segment_level_pct": 0.0, **twin}
    limits_w = list(limits_w) * int(rounds)
    t0 = to_utc(start, tz="UTC", what="start")   # a zone-less start is UTC, as documented
    tels, steps = [], []
    uuids = None
    for i, lim in enumerate(limits_w):
        a = t0 + pd.Timedelta(hours=hours_each * i)
        b = a + pd.Timedelta(hours=hours_each)
        run = simulate_training(a,
                                days=hours_each / 24.0, n_hosts=n_hosts,
                                gpus_per_host=gpus_per_host, stragglers=0,
                                telemetry_interval_s=telemetry_interval_s, seed=seed + i,
                                power_limit_w=float(lim), **twin)
        tel = run.telemetry
        tel = tel[(tel["timestamp"] >= a) & (tel["timestamp"] < b)].copy()
        # one fleet: the GPUs keep their identity from run to run (each run draws its
        # own thermal-resistance sample, a 3 % spread)
        key = tel["host"].astype(str) + "/" + tel["gpu_index"].astype(str)
        if uuids is None:
            uuids = dict(zip(key, tel["gpu_uuid"].astype(str)))
        tel["gpu_uuid"] = pd.array(key.map(uuids), dtype="string")
        tels.append(tel)
        st = run.steps
        st = st[st["timestamp"] < b].copy()
        st["power_limit_w"] = float(lim)
        steps.append(st)
    return (pd.concat(tels, ignore_index=True), pd.concat(steps, ignore_index=True))


def twin_step_time(limit_w: float, *, hours: float = 4.0, seed: int = 0, **twin) -> float:
    """The twin's true mean productive step time under a power limit, without the
    log's noise (``noise_pct = segment_level_pct = 0``) [s]."""
    twin = {"noise_pct": 0.0, "segment_level_pct": 0.0, **twin}
    run = simulate_training("2025-06-03", days=hours / 24.0, n_hosts=1, gpus_per_host=4,
                            stragglers=0, telemetry=False, seed=seed,
                            power_limit_w=float(limit_w), **twin)
    st = run.steps
    return float(st.loc[st["phase"].astype(str) == "train", "duration_s"].mean())
