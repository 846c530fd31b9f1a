"""Ride-through load loss of a forecast: against the same draw without the voltage sag.

:func:`counterfactual_sag_loss` is what :class:`~powerlab.interconnect.compliance.Compliance`
reads for a ``ride_through`` requirement when the series carries its sag-free twin
(``PowerTrace.without_sags``, which the forecast adapters fill by running the engine with
and without the scenario's disturbances).  Measured telemetry has no such twin: its load
loss stays :func:`powerlab.limits.loadmetrics.sag_load_loss`, against the mean of the
second before the sag (:data:`powerlab.site.disturbances.BASELINE_MEASURED`).

Definition (issue 20, item 3): the load lost is ``baseline(t) - power(t)``, the power the
site would have drawn without the sag minus what it drew, its largest value during the sag
and in the ``observe_s`` after it (reported apart by
:func:`powerlab.site.disturbances.sag_load_loss_vs_baseline`); a sag with no effect reads
0 exactly, and a training job's own swing is not counted.

References
----------
.. [1] ITI (CBEMA) Curve Application Note, Information Technology Industry Council, 2000:
   the no-interruption region ("no interruption in function") an equipment ride-through
   is judged against; what counts is the function lost because of the event.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["counterfactual_sag_loss", "simulated_sags"]


def simulated_sags(dp) -> pd.DataFrame | None:
    """The voltage sags a forecast draw simulated (its own ``voltage_sag`` events).

    Sags given from outside (measured, ``Compliance(spec, sags=...)``) are not among
    them: the engine did not simulate what they do, so against the sag-free twin they
    would read a loss of 0 that nothing supports.
    """
    ev = getattr(dp, "events", None)
    if ev is None or not len(ev) or "residual_voltage_pu" not in ev.columns:
        return None
    own = ev[ev["event"] == "voltage_sag"]
    return own if len(own) else None


def counterfactual_sag_loss(power_w, baseline_w, tick_s: float, start_utc,
                            sags: pd.DataFrame | None, *, residual_voltage_pu: float,
                            sag_duration_s: float, observe_s: float = 1.0
                            ) -> tuple[float, int]:
    """Largest load lost in the covered sags, against the sag-free series [W].

    A sag is covered when its residual voltage is at least ``residual_voltage_pu`` and
    it lasts at most ``sag_duration_s`` (as
    :func:`~powerlab.limits.loadmetrics.sag_load_loss`).

    Returns
    -------
    (float, int)
        The largest load loss during or after a covered sag [W] (NaN when none lies in
        the series) and the number of covered sags evaluated.
    """
    from ..site.disturbances import sag_load_loss_vs_baseline

    if sags is None or len(sags) == 0:
        return math.nan, 0
    x = np.asarray(power_w, dtype=float)
    t0 = pd.Timestamp(start_utc)
    rel = (pd.to_datetime(sags["timestamp"], utc=True) - t0).dt.total_seconds().to_numpy()
    dur = sags["duration_s"].to_numpy(float)
    res = sags["residual_voltage_pu"].to_numpy(float)
    covered = (res >= residual_voltage_pu - 1e-12) & (dur <= sag_duration_s + 1e-12)
    worst, used = 0.0, 0
    for t, d in zip(rel[covered], dur[covered]):
        k0 = math.floor(t / tick_s + 1e-9)
        if k0 < 0 or k0 + math.ceil((d + observe_s) / tick_s - 1e-9) > len(x):
            continue
        during, after = sag_load_loss_vs_baseline(x, baseline_w, tick_s, k0, d, observe_s)
        worst = max(worst, during, after)
        used += 1
    return (worst, used) if used else (math.nan, 0)
