"""The power of every draw over the whole horizon, reduced to time bins: the median and
the band over draws that the study package's page draws (its ``power_over_horizon``
table).

Each draw's power at the package's boundary is cut into at most :data:`MAX_BINS` bins of
equal length (whole ticks); per bin and draw the mean and the largest tick are kept, and
over the draws the median of the bin means, their 5 % and 95 % quantiles (linear
interpolation, :func:`numpy.quantile`; with fewer than 20 draws these lie between the
lowest and highest draws) and the largest tick of any draw.  Ticks that are not finite
(gaps in measured data) are left out of their bin; a bin with none is NaN.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .powertrace import PowerTrace

__all__ = ["MAX_BINS", "HorizonBand"]

#: Most bins over the horizon (a chart's row budget, far below altair's 5000 rows).
MAX_BINS = 400


class HorizonBand:
    """Collects the bins of each draw (:meth:`add`), then the table (:meth:`table`)."""

    def __init__(self, boundary: str, max_bins: int = MAX_BINS):
        self.boundary = boundary
        self.max_bins = int(max_bins)
        self.means: list[np.ndarray] = []
        self.peaks: list[np.ndarray] = []
        self.first: PowerTrace | None = None

    def add(self, trace: PowerTrace) -> None:
        """Bin one draw (the first draw's grid is every draw's)."""
        x = np.asarray(trace.power_w(self.boundary), float) / 1e6
        if self.first is None:
            self.first = trace
        n = len(self.first.power_w(self.boundary))
        x = x[:n] if len(x) >= n else np.pad(x, (0, n - len(x)), constant_values=np.nan)
        starts = self._starts(n)
        ok = np.isfinite(x)
        count = np.add.reduceat(ok.astype(int), starts)
        total = np.add.reduceat(np.where(ok, x, 0.0), starts)
        peak = np.maximum.reduceat(np.where(ok, x, -np.inf), starts)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.means.append(np.where(count > 0, total / count, np.nan))
        self.peaks.append(np.where(count > 0, peak, np.nan))

    def _starts(self, n: int) -> np.ndarray:
        bins = max(1, min(self.max_bins, n))
        return np.unique(np.linspace(0, n, bins + 1)[:-1].astype(int))

    def table(self) -> pd.DataFrame | None:
        """One row per bin: ``timestamp_utc`` (bin start), ``bin_s``, ``draws`` and the
        ``power_megawatts_*`` columns ``median``, ``p05``, ``p95`` (over the draws' bin
        means), ``draw0`` (draw 0's bin mean) and ``peak`` (largest tick of any draw);
        None before any draw."""
        if self.first is None:
            return None
        tr = self.first
        n = len(tr.power_w(self.boundary))
        starts = self._starts(n)
        widths = np.diff(np.append(starts, n)) * tr.tick_s
        means, peaks = np.vstack(self.means), np.vstack(self.peaks)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # all-NaN bins stay NaN
            q = np.nanquantile(means, [0.5, 0.05, 0.95], axis=0)
            peak = np.nanmax(peaks, axis=0)
        out = pd.DataFrame({
            "timestamp_utc": tr.start_utc + pd.to_timedelta(starts * tr.tick_s, unit="s"),
            "bin_s": widths, "power_megawatts_median": q[0], "power_megawatts_p05": q[1],
            "power_megawatts_p95": q[2], "power_megawatts_draw0": means[0],
            "power_megawatts_peak": peak})
        out["draws"] = len(self.means)
        out.attrs.update(boundary=self.boundary, tick_s=float(tr.tick_s), ticks=n)
        return out
