"""What a collector run achieved: :class:`CollectorReport` (statsmodels-style summary)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from .._summary import Results, Summary

__all__ = ["CollectorReport"]


@dataclass(frozen=True, repr=False)
class CollectorReport(Results):
    """What a collector achieved: rates, jitter, energy both ways, events, files.

    Attributes
    ----------
    gpus : pandas.DataFrame
        One row per GPU: ``samples``, ``achieved_rate_hz`` [Hz], ``jitter_ms`` (standard
        deviation of the intervals between its samples) [ms], ``max_gap_s`` [s], one
        ``rate_<group>_hz`` per signal group [Hz], ``energy_counter_j`` (difference of the
        NVML energy counter) [J], ``energy_integrated_j`` (trapezoidal integral of the
        instantaneous power over NVML's timestamps, same span) [J] and
        ``energy_disagreement_pct`` (integrated minus counter, relative to counter) [%].
    interval_s : float
        Target sampling interval [s].
    duration_s : float
        Time from start to stop [s].
    ticks, missed_ticks : int
        Ticks run, and ticks skipped because the loop fell more than one interval behind.
    lateness_mean_ms, lateness_max_ms : float
        How late ticks started relative to their schedule [ms].
    rows_written, files_written : int
        Samples and Parquet files written to the store.
    events : pandas.DataFrame
        Status events of this run.
    error : str or None
        The error that stopped the collector, if any.
    dropped_samples : int
        Samples not stored because the store fell more than ``max_buffer_s`` behind
        (each stretch is also a ``dropped`` status event).
    loss_bound_samples, loss_bound_s : int, float
        What a SIGKILL could have lost at most, from the writes measured in this run
        (:meth:`powerlab.collect.flushing.Flushing.loss_bound`).
    """

    gpus: pd.DataFrame
    interval_s: float
    duration_s: float
    ticks: int
    missed_ticks: int
    lateness_mean_ms: float
    lateness_max_ms: float
    rows_written: int
    files_written: int
    events: pd.DataFrame = field(repr=False)
    error: str | None = None
    dropped_samples: int = 0
    loss_bound_samples: int = 0
    loss_bound_s: float = float("nan")

    def summary_frame(self) -> pd.DataFrame:
        """The per-GPU table."""
        return self.gpus.copy()

    def summary(self) -> Summary:
        """The run in one paragraph and the per-GPU table."""
        head = (f"collected {self.duration_s:.1f} s at a target of {1 / self.interval_s:g} Hz: "
                f"{self.ticks} ticks ({self.missed_ticks} missed), tick lateness mean "
                f"{self.lateness_mean_ms:.2f} ms, max {self.lateness_max_ms:.2f} ms; "
                f"{self.rows_written} samples in {self.files_written} file(s)"
                + (f" ({self.dropped_samples} dropped: store behind)"
                   if self.dropped_samples else "")
                + f"; {len(self.events)} status event(s)"
                + (f"; a SIGKILL loses at most {self.loss_bound_samples} samples "
                   f"({self.loss_bound_s:.2f} s)" if self.loss_bound_samples else ""))
        cols = ["gpu_index", "samples", "achieved_rate_hz", "jitter_ms", "max_gap_s",
                "energy_counter_j", "energy_integrated_j", "energy_disagreement_pct"]
        s = Summary(float_format="{:.3f}")
        s.add_text(head)
        s.add_df(self.gpus[cols], index=False)
        if self.error:
            s.add_text(f"error: {self.error}")
        return s

    def _repr_line(self) -> str:
        return (f"<CollectorReport: {len(self.gpus)} GPU(s), {self.duration_s:.1f} s at "
                f"{1 / self.interval_s:g} Hz, {self.rows_written} samples in "
                f"{self.files_written} file(s)"
                + (f", error: {self.error}" if self.error else "") + ">")
