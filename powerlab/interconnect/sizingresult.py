"""The result of a mitigation search: the Pareto set of passing options, every option
evaluated, the search's size and status, and the files ``powerlab size-mitigation``
writes.

When no option passes, :attr:`SizingResult.closest` lists the options that came closest,
with their shortfall per requirement (``shortfall_<requirement>``: how far the option's
value lies over the limit, in the requirement's unit; 0 where it meets it, NaN where not
shown), ranked by the number of requirements failed, then by the sum of the shortfalls
as shares of their limits (``shortfall_share_sum``); ``mitigation_options.csv`` then holds
these rows (``passes`` false) rather than a header alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .._summary import Results, Summary
from ..exceptions import PowerlabError
from ..outputs import output_folder
from ..telemetry.store import atomic_write_bytes
from .powertrace import PowerTrace
from .searchspace import (
    COST_AXES,
    OPTION_COLUMNS,
    CostModel,
    MitigationOption,
    option_from_row,
    pareto_front,
)
from .sitemodel import SiteModel

__all__ = ["CLOSEST", "STATUSES", "SizingResult", "with_shortfalls"]

#: Options listed as the closest when none passes.
CLOSEST = 5


def with_shortfalls(evaluated: pd.DataFrame, values: list[dict], spec) -> pd.DataFrame:
    """``evaluated`` with a ``shortfall_<requirement>`` column per requirement (value over
    its limit, in its unit; 0 where met; NaN where not shown) and their sum as shares of
    the limits, ``shortfall_share_sum`` [-]; ``values`` one ``{requirement: value}`` per
    row."""
    out = evaluated.copy()
    share = np.zeros(len(out))
    for r in spec.requirements:
        v = np.array([vals.get(r.name, np.nan) for vals in values], dtype=float)
        short = np.where(np.isfinite(v), np.maximum(v - r.limit, 0.0), np.nan)
        out[f"shortfall_{r.name}"] = short
        if r.limit > 0:
            share += np.nan_to_num(short / r.limit)
    out["shortfall_share_sum"] = share
    return out

#: What a search can end with (``SizingResult.status``).
STATUSES = ("no_mitigation_needed", "options_found", "none_passes", "not_assessable")


class SizingResult(Results):
    """Result of :func:`size_mitigation`.

    Attributes
    ----------
    options : DataFrame
        Pareto set of passing options, cheapest first (``mitigation_options.csv``).
    evaluated : DataFrame
        Every option evaluated, passing or not.
    engine_runs : int
        Forecast engine runs [-].
    evaluations : int
        Option x draw evaluations (array arithmetic and one compliance check each) [-].
    status : str
        ``no_mitigation_needed`` (the site passes as it is), ``options_found``,
        ``none_passes`` (the search found no passing option) or ``not_assessable`` (the
        spec cannot be shown met by a forecast at this tick and horizon: the search was
        not run; :attr:`assessability` says why and what to run).
    assessability : Assessability
    interrupted : bool
        The search was stopped (Ctrl-C) before its end: :attr:`options` are the best of
        the options evaluated so far, not of the whole searched space.
    """

    def __init__(self, spec, evaluated: pd.DataFrame, *, engine_runs: int, evaluations: int,
                 draws: int, seed: int, description: str, cost: CostModel,
                 model: SiteModel | None = None, assessability=None,
                 interrupted: bool = False):
        self.spec = spec
        self.interrupted = bool(interrupted)
        self._model = model
        self.assessability = assessability
        if evaluated is None or not len(evaluated):
            evaluated = pd.DataFrame(columns=["option", "requires", *OPTION_COLUMNS, *COST_AXES,
                                              "storage_megawatts", "cost_usd_per_day",
                                              "passes", "requirements_passed",
                                              "requirements_failed",
                                              "requirements_not_shown"])
            evaluated["passes"] = evaluated["passes"].astype(bool)
        self.evaluated = evaluated
        self.engine_runs = engine_runs
        self.evaluations = evaluations
        self.draws = draws
        self.seed = seed
        self.description = description
        self.cost = cost
        ok = evaluated[evaluated["passes"]]
        if len(ok):
            ok = ok[pareto_front(ok)]
            ok = ok.sort_values(["cost_usd_per_day", *COST_AXES], kind="stable")
        cols = ["option", "requires", *OPTION_COLUMNS, *COST_AXES, "storage_megawatts",
                "cost_usd_per_day", "requirements_passed"]
        self.options = ok[cols].reset_index(drop=True)

    @property
    def found(self) -> bool:
        """Whether a passing option exists."""
        return len(self.options) > 0

    @property
    def status(self) -> str:
        """See the class docstring."""
        if self.assessability is not None and not self.assessability.ok:
            return "not_assessable"
        if not self.found:
            return "none_passes"
        return ("no_mitigation_needed" if self.options.iloc[0]["option"] == "none"
                else "options_found")

    @property
    def cheapest(self) -> pd.Series | None:
        """The cheapest passing option (a row of :attr:`options`), or None."""
        return self.options.iloc[0] if self.found else None

    @property
    def closest(self) -> pd.DataFrame:
        """When none passes: the :data:`CLOSEST` options that came closest (fewest
        requirements failed, then the smallest ``shortfall_share_sum``), with their
        shortfall per requirement; empty otherwise."""
        ev = self.evaluated
        if self.found or not len(ev) or "shortfall_share_sum" not in ev:
            return ev.iloc[:0]
        n_failed = ev["requirements_failed"].fillna("").map(
            lambda t: len([x for x in str(t).split(";") if x]))
        order = ev.assign(_n=n_failed).sort_values(
            ["_n", "shortfall_share_sum", "cost_usd_per_day"], kind="stable")
        cols = ["option", "requires", *OPTION_COLUMNS, *COST_AXES, "storage_megawatts",
                "cost_usd_per_day", "passes", "requirements_failed",
                *[c for c in ev if c.startswith("shortfall_")]]
        return order.head(CLOSEST)[cols].reset_index(drop=True)

    def option(self, i: int = 0) -> MitigationOption:
        """Row ``i`` of :attr:`options` as a :class:`MitigationOption` (0: the cheapest)."""
        return option_from_row(self.options.iloc[i])

    def trace(self, option: MitigationOption | int = 0, draw: int = 0) -> PowerTrace:
        """The site's power with an option applied, one draw (for comply, resonance
        screening or a grid-study export of the mitigated site)."""
        if self._model is None:
            raise PowerlabError("this result keeps no forecast to apply options to")
        m = self._model
        opt = self.option(option) if isinstance(option, (int, np.integer)) else option
        if not 0 <= draw < m.draws:
            raise PowerlabError(f"draw must be in 0..{m.draws - 1}, got {draw}")
        return m.trace(opt, draw, self.cost.filler_throughput_loss_pct,
                       description=f"{self.description}, draw {draw}, with "
                                   f"{opt.label()}")[0]

    def summary_frame(self) -> pd.DataFrame:
        """Every option evaluated (a copy of :attr:`evaluated`; the unmitigated site
        first)."""
        return self.evaluated.copy()

    def summary(self, **command_kw) -> Summary:
        """Summary (``command_kw``: scenario, requirements and out paths for the
        command printed when the spec cannot be assessed)."""
        lines = [f"{'requirement spec':<24}{self.spec.name}",
                 f"{'evaluated':<24}{self.description}",
                 f"{'engine runs':<24}{self.engine_runs}",
                 (f"{'option evaluations':<24}{len(self.evaluated)} options x {self.draws} "
                  f"draws = {self.evaluations}"), ""]
        if self.status == "not_assessable":
            lines[-1:-1] = ["", ("NOT ASSESSABLE: the search was not run (a forecast at this "
                                 "tick and horizon cannot show these requirements met)"),
                            self.assessability.text(**command_kw)]
            return _sizing_summary(lines)
        base = self.evaluated.iloc[0]
        lines[-1:-1] = [f"{'unmitigated fails':<24}{base['requirements_failed'] or '-'}"]
        if self._model is not None:
            lines[-1:-1] = [f"note: {n}" for n in self._model.notes]
        if self.status == "no_mitigation_needed":
            lines.append("NO MITIGATION NEEDED: the site as it is meets every requirement")
        elif self.found:
            c = self.cheapest
            lines.append(f"Cheapest passing option: {c['option']}")
            lines.append(f"  extra energy {c['extra_energy_megawatt_hours_per_day']:.3g} MWh/day, "
                         f"throughput loss {c['throughput_loss_pct']:.3g} %, storage "
                         f"{c['storage_megawatt_hours']:.3g} MWh, "
                         f"~${c['cost_usd_per_day']:,.0f}/day (illustrative prices)")
            lines.append(f"{len(self.options)} Pareto-optimal passing option(s) in "
                         "mitigation_options.csv")
        else:
            lines.append("NONE PASSES: no option in the searched space meets every "
                         "requirement")
            worst = self.evaluated["requirements_failed"].str.split(";").explode()
            lines.append("Requirements failed most often: " + ", ".join(
                worst.value_counts().index[:5]))
            lines += _closest_lines(self.closest, self.spec)
        return _sizing_summary(lines)

    def write(self, out_dir, **command_kw) -> tuple[Path, Path]:
        """Write ``mitigation_options.csv`` and ``mitigation_summary.txt``."""
        out = output_folder(out_dir)
        rows = self.options if self.found or not len(self.closest) else self.closest
        text = rows.to_csv(index=False, float_format="%.6g")
        csv = atomic_write_bytes(out / "mitigation_options.csv",
                                 lambda tmp: Path(tmp).write_text(text, "utf-8"))
        summ = str(self.summary(**command_kw)) + "\n"
        txt = atomic_write_bytes(out / "mitigation_summary.txt",
                                 lambda tmp: Path(tmp).write_text(summ, "utf-8"))
        return csv, txt


def _closest_lines(closest: pd.DataFrame, spec) -> list[str]:
    """The closest options and their shortfall per failed requirement, in words."""
    if not len(closest):
        return []
    units = {r.name: r.unit for r in spec.requirements}
    out = ["Closest options (in mitigation_options.csv, passes = False):"]
    for i, row in closest.iterrows():
        short = [f"{c[len('shortfall_'):]} +{row[c]:.3g} {units.get(c[len('shortfall_'):], '')}"
                 for c in closest if c.startswith("shortfall_") and c != "shortfall_share_sum"
                 and pd.notna(row[c]) and row[c] > 0]
        out.append(f"  {i + 1}. {row['option']}: over by " + (", ".join(short) or "-"))
    return out


def _sizing_summary(lines: list[str]) -> Summary:
    s = Summary("Mitigation sizing")
    s.add_text(lines, pre=True)
    return s
