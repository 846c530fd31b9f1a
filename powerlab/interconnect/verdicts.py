"""Verdicts of a requirement spec over the draws of a forecast or one measured trace.

:class:`ComplianceResult` turns the per-draw values of
:meth:`Compliance.evaluate <powerlab.interconnect.compliance.Compliance.evaluate>` into one
row per requirement: the value at the allowed exceedance probability, the share of draws
over the limit with its 95 % bound, the verdict and the note that says why
(``summary()``, ``summary_frame()``, ``write(dir)`` for ``compliance.csv``).

A requirement **fails** when more than ``spec.max_exceed_probability`` of the draws exceed
its limit (default 0: any draw).  ``value`` is the draw value at that quantile (the worst
draw by default), so ``value > limit`` exactly when the verdict is ``fail``; for one
measured trace ``exceed_probability`` is 0 or 1.  A requirement the data cannot show to
comply fails with ``value`` NaN (``assessed`` False, the reason in ``note``); see
:mod:`powerlab.interconnect.compliance`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import betaincinv

from .._summary import Results, Summary
from ..limits.evaluation import NOT_ASSESSABLE, PARTIAL, metric_name, rule_note
from ..limits.requirements import Requirement, RequirementSpec
from ..outputs import atomic_write, output_folder
from ..site.disturbances import BASELINE_FORECAST, BASELINE_MEASURED
from .powertrace import band_visibility

__all__ = ["COMPLIANCE_COLUMNS", "ComplianceResult", "ComplianceSummary"]

#: Columns of ``compliance.csv``.
COMPLIANCE_COLUMNS = ("requirement", "metric", "window_s", "limit", "value", "unit",
                      "exceed_probability", "verdict", "worst_window_start_utc",
                      "share_of_windows_over_limit")


def _order_value(vals: np.ndarray, p_max: float) -> float:
    """The draw value that is exceeded by at most ``p_max`` of the draws."""
    s = np.sort(vals)[::-1]
    return float(s[min(math.floor(p_max * len(s) + 1e-9), len(s) - 1)])


def _upper95(k: int, n: int) -> float:
    """One-sided 95 % Clopper-Pearson upper bound of a probability seen k times in n."""
    return 1.0 if k >= n else float(betaincinv(k + 1, n - k, 0.95))


class ComplianceResult(Results):
    """Results of :func:`~powerlab.interconnect.compliance.comply` (statsmodels style).

    Attributes
    ----------
    spec : RequirementSpec
    draw_values : DataFrame
        Per draw (rows) and requirement (columns): the value in the requirement's unit.
    tick_s, native_interval_s, duration_s : float
        Sample spacing, spacing of the underlying data, length of the series [s].
    description : str
        What was evaluated.
    trace : PowerTrace, DrawPower or None
        The measured trace, or draw 0 of a forecast (for plots, resonance screening and
        grid-study exports of the same series).
    """

    def __init__(self, spec: RequirementSpec, draw_values: pd.DataFrame,
                 plan: Mapping[str, tuple[str, str]], *, tick_s: float,
                 native_interval_s: float, duration_s: float, description: str = "",
                 trace=None, details: pd.DataFrame | None = None,
                 sampling: str = "interval_mean"):
        self.spec = spec
        self.trace = trace
        self.draw_values = draw_values
        self.draw_details = details if details is not None else pd.DataFrame(
            index=draw_values.index)
        self.sampling = sampling
        self.start_utc = getattr(trace, "start_utc", None)
        self.tick_s = tick_s
        self.native_interval_s = native_interval_s
        self.duration_s = duration_s
        self.description = description
        self._plan = dict(plan)
        self._frame = self._build()

    @property
    def draws(self) -> int:
        """Number of draws (1 for a measured trace) [-]."""
        return len(self.draw_values)

    def _build(self) -> pd.DataFrame:
        df = pd.DataFrame([self._row(r) for r in self.spec.requirements])
        for c in ("requirement", "kind", "metric", "unit", "verdict", "source", "note"):
            df[c] = df[c].astype("string")
        df["worst_window_start_utc"] = pd.to_datetime(df["worst_window_start_utc"],
                                                      utc=True)
        return df

    def _row(self, r: Requirement) -> dict:
        """One requirement's row: its draw statistics, whether the data assess it, the
        verdict and the note."""
        status, note = self._plan[r.name]
        st = self._draw_stats(r)
        assessed, note = self._assessed(r, status, note, st)
        verdict = "pass" if assessed and not st["prob"] > self.spec.max_exceed_probability \
            else "fail"
        note = self._notes(r, assessed, note, st)
        return {
            "requirement": r.name, "kind": r.kind, "metric": metric_name(self.spec, r),
            "window_s": r.window_s, "limit": r.limit, "value": st["value"], "unit": r.unit,
            "exceed_probability": st["prob"], "verdict": verdict,
            "exceed_probability_upper95": st["upper"], "value_median": st["med"],
            "value_worst": st["worst"], "assessed": assessed, "draws_assessed": st["n"],
            "exceedances": st["k"], "worst_window_start_utc": st["when"],
            "share_of_windows_over_limit": st["share"],
            "illustrative": r.illustrative, "source": r.source, "note": note}

    def _draw_stats(self, r: Requirement) -> dict:
        """Over the draws that assess ``r``: the reported value, the share over the limit
        and its 95 % bound, median and worst, the worst window (oscillation)."""
        vals = self.draw_values[r.name].to_numpy(float)
        ok = vals[np.isfinite(vals)]
        n = len(ok)
        st = dict(value=math.nan, prob=math.nan, upper=math.nan, med=math.nan,
                  worst=math.nan, share=math.nan, when=pd.NaT, k=0, n=n)
        if n:
            st["value"] = _order_value(ok, self.spec.max_exceed_probability)
            st["when"], st["share"] = self._window_detail(r, vals, st["value"])
            st["k"] = k = int((ok > r.limit).sum())
            st["prob"], st["upper"] = k / n, _upper95(k, n)
            st["med"], st["worst"] = float(np.median(ok)), float(ok.max())
        return st

    def _assessed(self, r: Requirement, status: str, note: str, st: dict
                  ) -> tuple[bool, str]:
        """Whether the data can show ``r`` met, and the note so far (``st``'s value and
        probabilities become NaN when they cannot)."""
        if status == NOT_ASSESSABLE or st["n"] == 0:
            if not note and r.kind == "ride_through":
                note = (f"no voltage sag to >= {r.residual_voltage_pu:g} pu lasting <= "
                        f"{r.window_s:g} s (with {r.observe_s:g} s after it) in the "
                        "data; give measured sags, or forecast them (engine ride-through "
                        "events)")
            note = "cannot be shown to comply: " + (note or "no value")
        elif status == PARTIAL and not st["prob"] > self.spec.max_exceed_probability:
            note = (f"cannot be shown to comply: {note}, {st['value']:.4g} {r.unit} there, "
                    "under the limit, but the full band's RMS can be larger")
        elif status == PARTIAL:
            return True, note + "; the full band's RMS can only be larger"
        else:
            return True, note
        st.update(value=math.nan, prob=math.nan, upper=math.nan)
        return False, note

    def _notes(self, r: Requirement, assessed: bool, note: str, st: dict) -> str:
        """The note of ``r``'s row: draws holding a sag, the spec's rule, what the
        sampling shows of a band, the worst window, the ride-through baseline."""
        if r.kind == "ride_through" and st["n"] and st["n"] < self.draws:
            note = (note + "; " if note else "") + (
                f"{st['n']} of {self.draws} draws hold a covered sag")
        extra = rule_note(self.spec, r) if assessed else ""
        if r.kind == "oscillation":
            extra = "; ".join(t for t in (extra, band_visibility(
                r.band_hz, max(self.tick_s, self.native_interval_s),
                self.sampling)) if t)
        if extra:
            note = (note + "; " if note else "") + extra
        if not assessed:
            st["when"], st["share"] = pd.NaT, math.nan
        elif r.kind == "oscillation" and pd.notna(st["when"]):
            note = (f"worst {r.window_s:g}-s window from {st['when']:%Y-%m-%d %H:%M:%S} UTC; "
                    f"{st['share']:.2%} of the windows over the limit"
                    + ("; " + note if note else ""))
        if r.kind == "ride_through" and st["n"]:     # what the load lost is measured from
            note = (note + "; " if note else "") + "baseline: " + (
                BASELINE_FORECAST if getattr(self.trace, "without_sags", None)
                is not None else BASELINE_MEASURED)
        return note

    def _window_detail(self, r: Requirement, vals: np.ndarray, value: float):
        """(start of the worst window [UTC], share of windows over the limit) of the
        draw whose value is reported; (NaT, NaN) for a requirement without windows."""
        col = f"{r.name}.worst_window_start_s"
        if r.kind != "oscillation" or col not in self.draw_details.columns:
            return pd.NaT, math.nan
        d = int(np.flatnonzero(vals == value)[0])
        start = float(self.draw_details[col].iloc[d])
        share = float(self.draw_details[f"{r.name}.share_of_windows_over_limit"].iloc[d])
        t0 = self.start_utc
        when = (pd.Timestamp(t0) + pd.Timedelta(seconds=start)) if t0 is not None \
            else pd.NaT
        return when, share

    def summary_frame(self) -> pd.DataFrame:
        """One row per requirement: the ``compliance.csv`` columns (for an oscillation
        requirement ``worst_window_start_utc`` and ``share_of_windows_over_limit`` of the
        reported draw; NaT/NaN for the other kinds), then
        ``exceed_probability_upper95`` (one-sided 95 % Clopper-Pearson bound over the
        draws), ``value_median``, ``value_worst``, ``assessed`` (False: the data cannot show the
        requirement met, verdict ``fail``, value NaN), ``draws_assessed``, ``exceedances``,
        ``kind``, ``illustrative``, ``source`` and ``note``."""
        extra = [c for c in self._frame.columns if c not in COMPLIANCE_COLUMNS]
        return self._frame[list(COMPLIANCE_COLUMNS) + extra].copy()

    @property
    def verdicts(self) -> pd.Series:
        """Verdict per requirement (``pass`` or ``fail``)."""
        return self._frame.set_index("requirement")["verdict"]

    @property
    def failed(self) -> list[str]:
        """Requirements that fail."""
        return self.verdicts[self.verdicts == "fail"].index.tolist()

    @property
    def not_assessed(self) -> list[str]:
        """Requirements that fail because the data cannot show them met (value NaN)."""
        f = self._frame
        return f.loc[~f["assessed"], "requirement"].tolist()

    @property
    def passed(self) -> bool:
        """True when every requirement passes."""
        return bool((self.verdicts == "pass").all())

    def summary(self) -> ComplianceSummary:
        """Text summary (``print(res.summary())``; HTML in JupyterLab)."""
        return ComplianceSummary(self)

    def _repr_line(self) -> str:
        return (f"<ComplianceResult {self.spec.name!r}: {len(self.failed)} fail "
                f"({len(self.not_assessed)} not assessable) of {len(self._frame)}, "
                f"{self.draws} draw(s)>")

    def to_csv(self, path) -> Path:
        """Write ``compliance.csv`` (columns :data:`COMPLIANCE_COLUMNS`) atomically."""
        text = self._frame[list(COMPLIANCE_COLUMNS)].to_csv(index=False, float_format="%.6g")
        return atomic_write(path, lambda tmp: Path(tmp).write_text(text, "utf-8"))

    def write(self, out_dir) -> tuple[Path, Path]:
        """Write ``out_dir/compliance.csv`` and ``out_dir/compliance_summary.txt``."""
        out = output_folder(out_dir)
        csv = self.to_csv(out / "compliance.csv")
        text = str(self.summary()) + "\n"
        txt = atomic_write(out / "compliance_summary.txt",
                           lambda tmp: Path(tmp).write_text(text, "utf-8"))
        return csv, txt


class ComplianceSummary(Summary):
    """What :meth:`ComplianceResult.summary` shows."""

    def __init__(self, res: ComplianceResult):
        super().__init__("Interconnection requirements check", width=140)
        self.res = res
        f = res._frame
        spec = res.spec
        self.header = pd.DataFrame({"value": [
            spec.name, spec.hash()[:12], spec.boundary, res.description or "-", res.draws,
            f"{res.tick_s:g} s", f"{res.native_interval_s:g} s", f"{res.duration_s:g} s",
            f"{spec.max_exceed_probability:g}"]},
            index=["requirement spec", "spec hash", "boundary", "evaluated", "draws", "tick",
                   "data interval", "duration", "allowed exceed probability"])
        t = f[["requirement", "limit", "value", "unit", "exceed_probability",
               "verdict"]].copy()
        if res.draws > 1:        # a bound over one trace says nothing
            t["P(exceed) 95% upper"] = f["exceed_probability_upper95"]
        t["illustrative"] = np.where(f["illustrative"], "yes", "no")
        self.table = t.set_index("requirement")
        n_fail, n_na = len(res.failed), len(res.not_assessed)
        if n_fail:
            self.verdict = (f"FAIL: {n_fail} of {len(f)} requirements fail "
                            f"({', '.join(res.failed)})")
            if n_na:
                self.verdict += (f"; {n_na} of them cannot be shown to comply from these "
                                 f"data ({', '.join(res.not_assessed)}; see the notes)")
        else:
            self.verdict = f"PASS: all {len(f)} requirements pass"
        self.notes = [f"{r}: {n}" for r, n in zip(f["requirement"], f["note"]) if n]
        n_ill = int(f["illustrative"].sum())
        if n_ill:
            self.notes.append(f"{n_ill} of {len(f)} limits are illustrative assumptions, "
                              "not published limits (see each requirement's source)")
        self.add_df(self.header, header=False)
        self.add_df(self.table)
        self.add_text([self.verdict] + [f"Note: {n}" for n in self.notes])
