"""Results of the facility power-swing forecast (statsmodels style).

:class:`ForecastResult` keeps the engine's per-tick IT power of every draw and derives
facility power, timelines, interval tables, metrics and energies from it;
:class:`ForecastSummary` is what ``summary()`` prints.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from .._options import choice, renamed_keywords
from .._progress import Progress
from .._summary import Results, Summary
from ..exceptions import PowerlabError
from ..limits.ramps import ramp_label
from ..limits.requirements import BOUNDARIES
from ..reliability.interruption_draws import interruption_summary
from ..reliability.interruptions import checkpoint_report
from .battery import battery_dispatch
from .disturbances import disturbance_summary, ups_transfer_w
from .facility import facility_power
from .planner import planner_summary
from .swings import GRID_BANDS_HZ, resolved_bands, swing_metrics
from .timebase import interval_edges, parse_resolution
from .uncertainty import exceedance_frame, quantile_bands

__all__ = ["ForecastResult", "ForecastSummary"]


class ForecastResult(Results):
    """Results of :func:`~powerlab.site.engine.forecast` (statsmodels style: a
    :class:`~powerlab._summary.Results`; ``print(result)`` prints its summary, ``repr`` is
    one line).

    Attributes
    ----------
    scenario : Scenario
    tick_s : float
        Engine tick [s].
    draws : int
    seed : int
    events : DataFrame
        ``draw, timestamp, tick, job, event, duration_s`` (start, checkpoint, eval,
        failure, restart, shutdown, stop).
    throughput : DataFrame
        Per draw and job: ``train_s``, ``lost_to_failures_s``, ``ramp_deficit_s``,
        ``stagger_delay_s``, ``useful_gpu_h``.
    interruptions : DataFrame or None
        Interruptions by cause (:func:`powerlab.reliability.interruption_draws.interruption_frame`).
    sag_free : callable or None
        Runs the ride-through counterfactual (the scenario without its voltage sags).

    The engine builds a result complete: ``interruptions`` and ``sag_free`` are
    constructor arguments, not attributes set afterwards.
    """

    def __init__(self, scenario, it_w, tick_s, start_utc, draws, seed, events, throughput,
                 reduced=None, *, interruptions: pd.DataFrame | None = None, sag_free=None):
        self.scenario = scenario
        self._it = it_w
        self.tick_s = tick_s
        self.start_utc = start_utc
        self.draws = draws
        self.seed = seed
        self.events = events
        self.throughput = throughput
        self.reduced = reduced
        self.interruptions = interruptions
        self.sag_free = sag_free
        if self._it is not None:
            self._it.setflags(write=False)
        elif reduced is None:
            raise PowerlabError("a forecast result needs per-tick power or a reduction")

    @property
    def keeps_ticks(self) -> bool:
        """Whether the per-tick power of every draw is kept (``keep_ticks=True``)."""
        return self._it is not None

    def _need_ticks(self, what: str):
        if self._it is None:
            raise PowerlabError(f"{what} needs the per-tick power, which this forecast "
                                "did not keep; run forecast(..., keep_ticks=True)")

    # -- raw arrays --------------------------------------------------------------------
    @property
    def n_ticks(self) -> int:
        """Ticks in the horizon [-]."""
        return self._it.shape[1] if self._it is not None else self.reduced.n_ticks

    @cached_property
    def times(self) -> pd.DatetimeIndex:
        """Start of each tick (UTC)."""
        return pd.date_range(self.start_utc, periods=self.n_ticks,
                             freq=pd.Timedelta(seconds=self.tick_s), unit="ns", name="timestamp")

    @cached_property
    def pue(self) -> np.ndarray:
        """Steady-state PUE at each tick (the site's input, from the ambient temperature);
        the realised PUE is :attr:`pue_realised` [-]."""
        return self.scenario.site.pue_at(self.times)

    @cached_property
    def _facility(self):
        self._need_ticks("facility power")
        site = self.scenario.site
        return facility_power(self._it, self.tick_s, self.pue,
                              electrical_loss_fraction=site.electrical_loss_fraction,
                              cooling_time_constant_s=site.cooling_time_constant_s,
                              base_load_w=site.base_load_w)

    @property
    def cooling_w(self) -> np.ndarray:
        """Cooling power, lagging the heat (:mod:`powerlab.site.facility`), shape
        (draws, ticks) [W]."""
        return self._facility.cooling_w

    @property
    def electrical_losses_w(self) -> np.ndarray:
        """UPS and distribution losses, shape (draws, ticks) [W]."""
        return self._facility.losses_w

    @property
    def pue_realised(self) -> np.ndarray:
        """Realised PUE per draw: facility energy before the battery, less the base
        load, over IT energy [-]."""
        if self._it is None:
            return self.reduced.pue_realised
        fac = self.facility_before_battery_w.sum(axis=1) - \
            self.scenario.site.base_load_w * self.n_ticks
        return fac / self._it.sum(axis=1)

    @property
    def it_w(self) -> np.ndarray:
        """IT power, shape (draws, ticks) [W]."""
        self._need_ticks("it_w")
        return self._it

    @cached_property
    def facility_before_battery_w(self) -> np.ndarray:
        """Facility power before the battery: IT + electrical losses + lagging cooling +
        base load (:func:`powerlab.site.facility.facility_power`), shape (draws, ticks)
        [W]."""
        out = self._facility.facility_w
        out.setflags(write=False)
        return out

    @cached_property
    def battery_w(self) -> np.ndarray | None:
        """Battery output per draw and tick (positive: discharge) [W], or None."""
        bat = self.scenario.mitigations.battery
        if bat is None:
            return None
        fac = self.facility_before_battery_w
        outs = [battery_dispatch(fac[d], self.tick_s, bat) for d in range(self.draws)]
        soc0 = bat.initial_soc_fraction * bat.energy_megawatt_hours * 3.6e9
        self._battery_drain_j = np.array([soc0 - o[1][-1] for o in outs])
        return np.vstack([o[0] for o in outs])

    @property
    def battery_recharge_j(self) -> np.ndarray:
        """Grid energy needed per draw to bring the battery back to its initial state of
        charge (0 without battery) [J]."""
        if self.scenario.mitigations.battery is None:
            return np.zeros(self.draws)
        if self._it is None:
            self._battery_drain_j = self.reduced.battery_drain_j
        else:
            self.battery_w  # noqa: B018 - computes the drain
        eff = self.scenario.mitigations.battery.round_trip_efficiency
        return np.maximum(self._battery_drain_j, 0.0) / eff + np.minimum(
            self._battery_drain_j, 0.0)

    @cached_property
    def facility_w(self) -> np.ndarray:
        """Facility (grid) power, shape (draws, ticks) [W]."""
        # less the load carried by UPS batteries during voltage sags (site.disturbances)
        ups = None if self._it is None else ups_transfer_w(
            self.scenario, self._it, self.start_utc, self.tick_s,
            self.facility_before_battery_w)
        if self.battery_w is None and ups is None:
            return self.facility_before_battery_w
        out = self.facility_before_battery_w - (
            0.0 if self.battery_w is None else self.battery_w) - (0.0 if ups is None
                                                                   else ups)
        out.setflags(write=False)
        return out

    @renamed_keywords(scope="boundary")
    def power_w(self, boundary: str = "facility") -> np.ndarray:
        """Power of one boundary, ``"facility"`` or ``"it"``, shape (draws, ticks) [W]."""
        choice(boundary, "boundary", BOUNDARIES)
        self._need_ticks("power_w()")
        return self.facility_w if boundary == "facility" else self.it_w

    @renamed_keywords(scope="boundary")
    def energy_j(self, boundary: str = "facility") -> np.ndarray:
        """Energy over the horizon per draw [J]."""
        if self._it is None:
            choice(boundary, "boundary", BOUNDARIES)
            return self.reduced.energy[boundary]
        return self.power_w(boundary).sum(axis=1) * self.tick_s

    # -- frames ------------------------------------------------------------------------
    @cached_property
    def timeline(self) -> pd.DataFrame:
        """Tidy per-tick frame: ``timestamp, boundary, power_w_mean, power_w_p10,
        power_w_p50, power_w_p90`` (quantiles across draws; the ``boundary`` column was
        named ``scope`` before 2026-12-03)."""
        self._need_ticks("timeline")
        parts = []
        for boundary in ("it", "facility"):
            x = self.power_w(boundary)
            q = np.quantile(x, [0.1, 0.5, 0.9], axis=0) if self.draws > 1 else \
                np.repeat(x, 3, axis=0)
            parts.append(pd.DataFrame({
                "timestamp": self.times, "boundary": boundary, "power_w_mean": x.mean(axis=0),
                "power_w_p10": q[0], "power_w_p50": q[1], "power_w_p90": q[2]}))
        df = pd.concat(parts, ignore_index=True)
        df["boundary"] = df["boundary"].astype("string")
        return df

    @renamed_keywords(scope="boundary")
    def summary_frame(self, resolution="1min", boundary: str | None = None,
                      alpha: float = 0.2) -> pd.DataFrame:
        """Interval statistics, one row per interval and boundary.

        Parameters
        ----------
        resolution : str or float
            Interval length (``'1s'``, ``'1min'``, ``'15min'`` or seconds), a whole
            number of ticks.
        boundary : {'facility', 'it'}, optional
            Only this boundary (default: both).
        alpha : float, default 0.2
            The band is the ``alpha/2`` and ``1 - alpha/2`` quantiles across draws of the
            interval mean (p10/p90 for the default).

        Returns
        -------
        DataFrame
            ``interval_start_utc, interval_end_utc, boundary, power_w_mean`` (mean over
            draws of the interval mean), ``power_w_min``/``power_w_max`` (extremes over
            ticks and draws), ``power_w_p10``/``power_w_p90`` (band of the interval
            mean across draws), ``ramp_up_w_per_s_max``/``ramp_down_w_per_s_max``
            (largest tick-to-tick rise/fall into a tick of the interval, any draw),
            ``events`` (events of draw 0 in the interval, ``'job:event'`` joined by
            ``'; '``).
        """
        res = parse_resolution(resolution)
        red = self.reduced if self._it is None else None
        edges = (red.tick_edges(res) if red is not None
                 else interval_edges(self.n_ticks, self.tick_s, res))
        counts = np.diff(np.append(edges, self.n_ticks))
        starts = self.times[edges]
        ends = starts + pd.to_timedelta(counts * self.tick_s, unit="s")
        ev_text = self._events_by_interval(edges)
        boundaries = [boundary] if boundary else ["facility", "it"]
        frames = []
        for sc in boundaries:
            means, vmin, vmax, up, down = self._interval_stats(sc, res, edges, counts)
            lo_q, hi_q = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
            frames.append(pd.DataFrame({
                "interval_start_utc": starts,
                "interval_end_utc": ends,
                "boundary": sc,
                "power_w_mean": means.mean(axis=0),
                "power_w_min": vmin,
                "power_w_max": vmax,
                "power_w_p10": lo_q,
                "power_w_p90": hi_q,
                "ramp_up_w_per_s_max": up,
                "ramp_down_w_per_s_max": down,
                "events": ev_text,
            }))
        df = pd.concat(frames, ignore_index=True)
        df["boundary"] = df["boundary"].astype("string")
        df["events"] = df["events"].astype("string")
        return df

    def _events_by_interval(self, edges: np.ndarray) -> list[str]:
        """Step of :meth:`summary_frame`: the events of draw 0 starting in each interval,
        ``'job:event'`` joined by ``'; '``."""
        ev0 = self.events[self.events["draw"] == 0]
        idx = np.searchsorted(edges, ev0["tick"].to_numpy(), side="right") - 1
        ok = (idx >= 0) & (ev0["tick"].to_numpy() < self.n_ticks)
        labels = (ev0["job"] + ":" + ev0["event"]).to_numpy()
        ev_text = [""] * len(edges)
        for i, lab in zip(idx[ok], labels[ok]):
            ev_text[i] = lab if not ev_text[i] else ev_text[i] + "; " + lab
        return ev_text

    def _interval_stats(self, boundary: str, res: float, edges: np.ndarray,
                        counts: np.ndarray) -> tuple:
        """Step of :meth:`summary_frame`: per interval of ``res`` seconds, the interval
        means of every draw, the lowest and highest tick and the largest tick-to-tick
        rise and fall of any draw [W], [W/s] (from the reduction, or from the ticks)."""
        red = self.reduced if self._it is None else None
        if red is not None:
            return (red.interval_means(boundary, res),
                    red.group(red.vmin[boundary], res, "min"),
                    red.group(red.vmax[boundary], res, "max"),
                    red.group(red.up[boundary], res, "max"),
                    red.group(red.down[boundary], res, "max"))
        x = self.power_w(boundary)
        means = np.add.reduceat(x, edges, axis=1) / counts
        dx = np.diff(x, axis=1, prepend=x[:, :1]) / self.tick_s
        vmin = np.minimum.reduceat(x.min(axis=0), edges)
        vmax = np.maximum.reduceat(x.max(axis=0), edges)
        up = np.maximum.reduceat(np.maximum(dx.max(axis=0), 0.0), edges)
        down = np.maximum.reduceat(np.maximum(-dx.min(axis=0), 0.0), edges)
        return means, vmin, vmax, up, down

    @renamed_keywords(scope="boundary")
    def exceedance(self, thresholds_w, resolution="15min", boundary: str = "facility",
                   statistic: str = "mean") -> pd.DataFrame:
        """``P(power > x)`` per interval and threshold with its Monte Carlo standard error
        (:func:`powerlab.site.uncertainty.exceedance_frame`)."""
        return exceedance_frame(self, thresholds_w, resolution, boundary, statistic)

    @renamed_keywords(scope="boundary")
    def quantile_bands(self, probs=(0.1, 0.5, 0.9), resolution="15min",
                       boundary: str = "facility", statistic: str = "mean") -> pd.DataFrame:
        """Quantiles of the interval power across draws with their Monte Carlo standard
        errors (:func:`powerlab.site.uncertainty.quantile_bands`)."""
        return quantile_bands(self, probs, resolution, boundary, statistic)

    # -- metrics -----------------------------------------------------------------------
    #: Progress of :attr:`metrics` (swings and spectra of every draw, what
    #: :meth:`summary` needs: minutes for weeks of ticks) on standard error: None (the
    #: default) when its estimate is 2 s or more, True always, False never
    metrics_progress: bool | None = None
    #: Rough cost of :attr:`metrics` per draw and boundary for its estimate: [s per tick],
    #: [s per second of horizon] (the spectrum's segments): a day at 0.1 s took 0.5 s,
    #: 54 days at 1 s 12-23 s on a loaded 2-core machine; taken so the estimate errs long
    METRIC_COST_S = (3e-7, 3e-6)

    @cached_property
    def metrics(self) -> pd.DataFrame:
        """Swing metrics per ``boundary`` and ``draw`` (see
        :func:`powerlab.site.swings.swing_metrics`; without the ticks kept, the rules of
        :mod:`powerlab.site.reduction`; the ``boundary`` column was named ``scope`` before
        2026-12-03)."""
        if self._it is None:
            return pd.DataFrame(self.reduced.rows).sort_values(
                ["boundary", "draw"], key=lambda c: c.map({"facility": 0, "it": 1})
                if c.name == "boundary" else c).reset_index(drop=True)
        rows = []
        n = self._it.shape[1]
        per_tick, per_s = self.METRIC_COST_S
        est_s = 2 * self.draws * n * (per_tick + per_s * self.tick_s)
        on = est_s >= 2.0 if self.metrics_progress is None else bool(self.metrics_progress)
        with Progress(2 * self.draws, "forecast metrics", "draw", enabled=on) as bar:
            bar.announce(f"swings and spectra of {n:,} ticks x {self.draws} draws x 2 "
                         "boundaries", estimate_s=est_s)
            for sc in ("facility", "it"):
                x = self.power_w(sc)
                for d in range(self.draws):
                    m = swing_metrics(x[d], self.tick_s)
                    rows.append({"boundary": sc, "draw": d, **m})
                    bar.update()
        return pd.DataFrame(rows)

    def summary(self) -> ForecastSummary:
        """Text summary (``print(res.summary())``; renders as HTML in JupyterLab)."""
        return ForecastSummary(self)

    def _repr_line(self) -> str:
        """``<ForecastResult 'name': draws x ticks of tick s from start>``."""
        return (f"<ForecastResult {self.scenario.name!r}: {self.draws} draws x "
                f"{self.n_ticks} ticks of {self.tick_s:g} s from {self.start_utc}>")


#: The figures of the summary's table: the metric (:attr:`ForecastResult.metrics`) ->
#: its label, in order.
_FIGURES = {
    "peak_w": "peak [MW]", "min_w": "minimum [MW]",
    "swing_1s_w": "largest swing in 1 s [MW]",
    "swing_10s_w": "largest swing in 10 s [MW]",
    "swing_60s_w": "largest swing in 60 s [MW]",
    **{k: f"max ramp: {ramp_label(k)} [{u}]" for k, u in (
        ("ramp_up_w_per_s_1s", "MW/s"), ("ramp_down_w_per_s_1s", "MW/s"),
        ("ramp_up_w_per_min_1min", "MW/min"),
        ("ramp_down_w_per_min_1min", "MW/min"),
        ("ramp_up_w_per_s_100ms", "MW/s"), ("ramp_up_w_per_s_tick", "MW/s"))},
    "dominant_frequency_hz": "dominant frequency [Hz]",
    "band_0p1_2hz_rms_w": "RMS in 0.1-2 Hz, whole-horizon Welch [MW]",
    "band_2_20hz_rms_w": "RMS in 2-20 Hz, whole-horizon Welch [MW]",
    "band_3_30hz_rms_w": "RMS in 3-30 Hz, whole-horizon Welch [MW]"}


class ForecastSummary(Summary):
    """Summary tables of a :class:`ForecastResult`: the run, its figures (median and
    worst over draws), the planner's figures, events, throughput, interruptions,
    checkpoints, voltage sags and what the tick resolves."""

    def __init__(self, res: ForecastResult):
        super().__init__("Power-swing forecast", float_format="{:,.3f}", width=120)
        self.res = res
        m = res.metrics
        self.header = _run_table(res)
        self.table = _figure_table(res, m)
        self.planner = (planner_summary(res) if res.keeps_ticks else pd.DataFrame(
            {"note": ["planner figures need forecast(..., keep_ticks=True)"]}))
        evc = res.events.groupby("event").size() / res.draws
        self.events = evc.rename("per draw").to_frame()
        self.throughput = res.throughput.groupby("job")[[
            "train_s", "lost_to_failures_s", "ramp_deficit_s", "useful_gpu_h"]].mean()
        # interruptions, checkpoints and disturbances of the forecast (their own modules)
        self.interruptions = interruption_summary(res)
        self.checkpoints = checkpoint_report(res.scenario)
        self.disturbances = disturbance_summary(res)
        self.notes = _band_notes(res.tick_s)
        self.add_df(self.header, header=False)
        self.add_df(self.table)
        self.add_df(self.planner, "Planner figures (facility; over draws)")
        self.add_df(self.events, "Events (mean count per draw)")
        self.add_df(self.throughput, "Throughput (mean per draw)")
        for title, df in self._interruption_tables():  # interruptions hook
            self.add_df(df.T, title)
        self.add_text([f"Note: {n}" for n in self.notes])

    def _interruption_tables(self) -> list:
        """(title, frame) of the interruption and checkpoint tables that have rows."""
        out = [("Interruptions and effective training time (over draws)",
                self.interruptions),
               ("Checkpoint interval (Young/Daly) and its cost", self.checkpoints),
               ("Voltage sags: load lost at the point of interconnection and recovery",
                self.disturbances)]
        return [(t, df) for t, df in out if len(df)]


def _run_table(res: ForecastResult) -> pd.DataFrame:
    """Step: the run (scenario, hash, horizon, tick, draws, seed, GPUs, jobs)."""
    sc = res.scenario
    end = res.start_utc + pd.Timedelta(seconds=res.n_ticks * res.tick_s)
    return pd.DataFrame({"value": [
        sc.name, sc.hash()[:12], str(res.start_utc), str(end), f"{res.tick_s:g} s",
        res.draws, res.seed, sc.hardware.cluster_gpus, len(sc.jobs)]},
        index=["scenario", "hash", "start (UTC)", "end (UTC)", "tick", "draws", "seed",
               "GPUs", "jobs"])


def _figure_table(res: ForecastResult, m: pd.DataFrame) -> pd.DataFrame:
    """Step: each figure of :data:`_FIGURES` (MW, MW/s, MW/min; Hz), the energy [MWh] and
    the realised PUE, median and worst over draws, per boundary."""
    rows = {}
    for sc_name in ("facility", "it"):
        sub = m[m["boundary"] == sc_name]
        for k, lab in _FIGURES.items():
            v = sub[k].to_numpy()
            if np.isnan(v).all():
                continue
            f = 1.0 if k == "dominant_frequency_hz" else 1e-6
            rows.setdefault(lab, {})[f"{sc_name} median"] = np.median(v) * f
            rows[lab][f"{sc_name} worst"] = (np.nanmin(v) if k == "min_w"
                                             else np.nanmax(v)) * f
    e = {s: res.energy_j(s) / 3.6e9 for s in ("facility", "it")}
    rows["energy [MWh]"] = {"facility median": np.median(e["facility"]),
                            "facility worst": e["facility"].max(),
                            "it median": np.median(e["it"]), "it worst": e["it"].max()}
    pr = res.pue_realised
    rows["PUE realised [-]"] = {"facility median": float(np.median(pr)),
                                "facility worst": float(pr.max())}
    return pd.DataFrame(rows).T


def _band_notes(tick_s: float) -> list[str]:
    """Step: what the tick resolves of each grid band (its Nyquist frequency)."""
    nyq = 0.5 / tick_s
    notes = []
    for name, (lo, hi) in GRID_BANDS_HZ.items():
        got = resolved_bands(tick_s)[name]
        label = f"{lo:g}-{hi:g} Hz"
        if got[1] is None:
            notes.append(f"Tick {tick_s:g} s resolves up to {nyq:g} Hz: the "
                         f"{label} grid band is not resolved.")
        elif got[1] < hi:
            notes.append(f"Tick {tick_s:g} s resolves up to {nyq:g} Hz: the "
                         f"{label} grid band only to {got[1]:g} Hz.")
        else:
            notes.append(f"Tick {tick_s:g} s resolves the {label} grid band.")
    return notes
