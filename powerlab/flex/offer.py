"""The flexibility offer: megawatts a site can shed, how fast, for how long, at what cost.

For each registered lever and level (:data:`powerlab.levers.registry.LEVERS`: each lever
family gives its own rows, :meth:`~powerlab.levers.lever.CurtailmentLever.offer_rows`)
the scenario is forecast with the lever applied, with the same seeds as the baseline (every Monte Carlo draw: the same
failures and timing offsets), and the shed power is the baseline's mean IT power minus
the curtailed one over the hold window, per draw; its mean and 5-95 % range across draws
are the offer and its uncertainty (failures during the window shed nothing).  The
throughput cost comes from the job's power-throughput curve with its band
(:mod:`powerlab.levers.curve`).

Columns of ``flex_offer.csv`` (:meth:`FlexOffer.summary_frame`):
``lever, power_limit_w, clock_sm_mhz, shed_megawatts, shed_megawatts_p05,
shed_megawatts_p95, shed_pct_of_it, notice_s, ramp_time_s, hold_max_s,
step_rate_loss_pct, step_rate_loss_pct_lower, step_rate_loss_pct_upper,
lost_gpu_hours_per_hour, restart_gpu_hours, extra_checkpoint_writes,
restart_risk_probability, note``.

References
----------
.. [1] Texas Senate Bill 6 (89th Legislature, 2025): ERCOT may
   direct large loads (>= 75 MW) to curtail in an emergency.
.. [2] Emerald AI, "Emerald Conductor" demonstrations: ~25 % for 3 h on a 256-GPU
   cluster (Phoenix, 2025); > 30 % within 30 s, held up to 10 h, on 96 GPUs (London,
   Dec 2025).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .._format import safe_frame
from .._summary import Results, Summary
from ..exceptions import PowerlabError
from ..levers.jobs import job_curves, site_power_range_w
from ..levers.lever import LeverAssumptions, OfferContext
from ..levers.registry import LEVERS
from ..outputs import output_folder
from ..site.engine import forecast
from ..site.scenario import Scenario
from ..telemetry.timeutil import to_utc

__all__ = ["FlexOffer", "flex_offer"]

#: Response times [s] and durations [s] of the offer's tidy frame.
RESPONSES_S = (1, 5, 10, 30, 60, 120, 300, 900)
DURATIONS_S = (900, 3600, 3 * 3600, 10 * 3600)


class FlexOffer(Results):
    """A site's flexibility offer (results object: ``summary()``, ``summary_frame()``).

    Attributes
    ----------
    rows : pandas.DataFrame
        One row per lever and level (the columns of ``flex_offer.csv``).
    it_power_w : float
        Full IT power of the site (every job training unconstrained) [W].
    window : tuple of pandas.Timestamp
        The hold window the sheds are measured over.
    curves : dict
        Power-throughput curve per job.
    assumptions : LeverAssumptions
    """

    def __init__(self, rows, it_power_w, window, curves, assumptions, draws):
        self.rows = rows
        self.it_power_w = float(it_power_w)
        self.window = window
        self.curves = curves
        self.assumptions = assumptions
        self.draws = draws

    def summary_frame(self) -> pd.DataFrame:
        """The offer, one row per lever and level."""
        return self.rows.copy()

    def response_frame(self) -> pd.DataFrame:
        """Tidy frame for a chart: the most MW sheddable within each response time and
        held for each duration, and the cheapest lever giving at least 95 % of it.

        Columns ``response_s, duration_s, shed_megawatts, shed_pct_of_it, lever,
        power_limit_w, step_rate_loss_pct``.
        """
        out = []
        r = self.rows
        for resp in RESPONSES_S:
            for dur in DURATIONS_S:
                ok = r[(r["ramp_time_s"] <= resp) & (r["hold_max_s"] >= dur)
                       & (r["shed_megawatts"] > 0)]
                if ok.empty:
                    out.append((resp, dur, 0.0, 0.0, "none", np.nan, 0.0))
                    continue
                best = ok["shed_megawatts"].max()
                pick = ok[ok["shed_megawatts"] >= 0.95 * best].sort_values(
                    "lost_gpu_hours_per_hour").iloc[0]
                out.append((resp, dur, float(best), 100 * best * 1e6 / self.it_power_w,
                            pick["lever"], pick["power_limit_w"],
                            pick["step_rate_loss_pct"]))
        return pd.DataFrame(out, columns=["response_s", "duration_s", "shed_megawatts",
                                          "shed_pct_of_it", "lever", "power_limit_w",
                                          "step_rate_loss_pct"])

    def best(self, response_s: float = 30.0, hold_s: float = 3 * 3600.0,
             min_pct_of_it: float = 0.0) -> pd.Series | None:
        """The cheapest row shedding at least ``min_pct_of_it`` % of IT power within
        ``response_s`` and held ``hold_s`` (None when there is none)."""
        r = self.rows
        ok = r[(r["ramp_time_s"] <= response_s) & (r["hold_max_s"] >= hold_s)
               & (r["shed_pct_of_it"] >= min_pct_of_it) & (r["shed_megawatts"] > 0)]
        if ok.empty:
            return None
        return ok.sort_values(["lost_gpu_hours_per_hour", "shed_megawatts"],
                              ascending=[True, False]).iloc[0]

    def summary(self) -> Summary:
        """Headline (25 % of IT power within 30 s for 3 h) and the table."""
        a = self.assumptions
        said = [t for lv in LEVERS.objects() if (t := lv.response_text(a)) is not None]
        lines = [(f"Flexibility offer: IT power {self.it_power_w / 1e6:.2f} MW, hold window "
                 f"{self.window[0]:%Y-%m-%d %H:%M} - {self.window[1]:%H:%M} UTC, "
                 f"{self.draws} draws"),
                 "Response assumptions: " + ", ".join(said)]
        b = self.best(30.0, 3 * 3600.0, 25.0)
        if b is None:
            lines.append("No lever sheds 25 % of IT power within 30 s for 3 h.")
        else:
            lines.append(
                f"Cheapest >= 25 % within 30 s for 3 h: {b['lever']} at "
                f"{b['power_limit_w']:.0f} W: {b['shed_megawatts']:.2f} MW "
                f"({b['shed_pct_of_it']:.1f} % of IT; draws 5-95 %: "
                f"{b['shed_megawatts_p05']:.2f}-{b['shed_megawatts_p95']:.2f} MW), step "
                f"rate -{b['step_rate_loss_pct']:.1f} % (90 % band "
                f"{b['step_rate_loss_pct_lower']:.1f}-{b['step_rate_loss_pct_upper']:.1f} %)"
                f", {b['lost_gpu_hours_per_hour']:.0f} GPU-h lost per hour")
        cols = ["lever", "power_limit_w", "shed_megawatts", "shed_pct_of_it", "ramp_time_s",
                "hold_max_s", "step_rate_loss_pct", "lost_gpu_hours_per_hour"]
        s = Summary(float_format="{:.2f}")
        s.add_text(lines)
        s.add_df(self.rows[cols], index=False)
        return s

    def write(self, out_dir) -> Path:
        """Write ``flex_offer.csv`` into ``out_dir`` (created); returns its path."""
        out = output_folder(out_dir)
        path = out / "flex_offer.csv"
        safe_frame(self.rows).to_csv(path, index=False, float_format="%.6g")
        return path


def _window_means(res, a: int, b: int) -> np.ndarray:
    return res.it_w[:, a:b].mean(axis=1)


def default_window(scenario: Scenario, hold_s: float) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The hold window: from 10 min after every job has started up, ``hold_s`` long
    (cut at the horizon's end)."""
    ready = max(j.start_utc + pd.Timedelta(seconds=j.startup_s) for j in scenario.jobs)
    t0 = max(ready + pd.Timedelta(minutes=10), scenario.start_utc)
    t1 = min(t0 + pd.Timedelta(seconds=hold_s), scenario.end_utc)
    if t1 <= t0:
        raise PowerlabError("the horizon leaves no time for a hold window after the jobs "
                            "start")
    return t0, t1


def flex_offer(scenario: Scenario, curves=None, *, hold_s: float = 3 * 3600.0,
               start=None, levels_w=None, draws: int = 20, seed: int = 0,
               tick_s: float = 1.0, assumptions: LeverAssumptions | None = None
               ) -> FlexOffer:
    """The flexibility offer of a scenario.

    The steps: the hold window (``_hold_window``), the baseline forecast, then each
    registered lever family's rows (:meth:`~powerlab.levers.lever.CurtailmentLever.offer_rows`:
    one forecast per setting on the same seed, read as the shed over the window), in the
    registry's order.

    Parameters
    ----------
    scenario : Scenario
    curves : PowerThroughputCurve or mapping of job name to curve, optional
        Default: the prior of the scenario's GPU model (:func:`~powerlab.levers.jobs.job_curves`).
    hold_s : float
        Length of the window the sheds are measured over [s].
    start : str or pandas.Timestamp, optional
        Start of that window (default: :func:`default_window`).
    levels_w : sequence of float, optional
        Power limits offered (default: from the GPU's maximum limit down to its minimum
        in 50-W steps).
    draws, seed : int
        Monte Carlo draws and seed of the forecast engine.
    tick_s : float
        Engine tick [s] (1 s: the offer is about minutes and hours).
    assumptions : LeverAssumptions, optional

    Returns
    -------
    FlexOffer
    """
    if not isinstance(scenario, Scenario):
        raise PowerlabError(f"flex_offer() needs a Scenario, got {type(scenario).__name__}")
    a = assumptions or LeverAssumptions()
    cv = job_curves(scenario, curves)
    w0, w1 = _hold_window(scenario, start, hold_s)
    i0 = round((w0 - scenario.start_utc).total_seconds() / tick_s)
    i1 = round((w1 - scenario.start_utc).total_seconds() / tick_s)
    hold_max = (scenario.end_utc - w0).total_seconds()
    _, full_w, _ = site_power_range_w(scenario)
    base = forecast(scenario, draws=draws, seed=seed, tick_s=tick_s)
    b_mean = _window_means(base, i0, i1)

    def shed_of(sc):
        """Shed over the window of a scenario's forecast on the baseline's seed [MW]:
        mean, 5th and 95th percentile over draws."""
        res = forecast(sc, draws=draws, seed=seed, tick_s=tick_s)
        s = (b_mean - _window_means(res, i0, i1)) / 1e6
        return float(s.mean()), float(np.quantile(s, 0.05)), float(np.quantile(s, 0.95))

    offer = OfferContext(scenario, cv, a, (w0, w1), hold_s, hold_max, levels_w, shed_of)
    rows = [row.as_dict() for first, members in LEVERS.families()
            for row in first.offer_rows(offer, members)]
    df = pd.DataFrame(rows)
    df.insert(6, "shed_pct_of_it", 100 * df["shed_megawatts"] * 1e6 / full_w)
    return FlexOffer(df, full_w, (w0, w1), cv, a, draws)


def _hold_window(scenario: Scenario, start, hold_s: float
                 ) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The hold window from ``start`` (tz-aware, within the horizon), ``hold_s`` long
    and cut at the horizon's end; :func:`default_window` without a start."""
    if start is None:
        return default_window(scenario, hold_s)
    w0 = to_utc(start, what="start")
    w1 = min(w0 + pd.Timedelta(seconds=hold_s), scenario.end_utc)
    if not scenario.start_utc <= w0 < w1:
        raise PowerlabError(f"start {w0} is outside the scenario's horizon")
    return w0, w1
