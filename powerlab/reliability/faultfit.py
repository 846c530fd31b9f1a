"""Node hazards fitted to fault records: rates by class, a lemon-node frailty with its test,
repair-time distributions and the time trend, each with its uncertainty.

Model
-----
Node :math:`i` has unexpected faults as a Poisson process of rate :math:`\\lambda z_i`
per node-day in service, with a gamma frailty :math:`z_i \\sim \\Gamma(1/\\theta, \\theta)`
(mean 1, variance :math:`\\theta`): a node's count over its exposure :math:`E_i` is then
negative binomial (NB2) with mean :math:`\\lambda E_i` and variance
:math:`\\lambda E_i (1 + \\theta\\lambda E_i)`.  :math:`\\theta = 0` is the homogeneous
Poisson fleet; a large :math:`\\theta` means a few "lemon" nodes fail again and again.

- **Rates by class**: faults of class :math:`c` over the fleet's exposure in service
  (node-days minus the union of each node's outages), with exact (Garwood) intervals
  (:func:`powerlab.reliability.rates.garwood_interval`).  Planned outages are counted
  apart.
- **Frailty**: Dean and Lawless's score test and the NB2 fit of :math:`\\theta` with its
  likelihood-ratio test against Poisson on the boundary (half chi-square)
  (:func:`powerlab.reliability.survival.dispersion_test`); the lemon table compares the
  nodes with at least 1, 2, 5 and 10 faults against both models.
- **Repair**: exponential, Weibull and lognormal by censored maximum likelihood
  (:mod:`powerlab.reliability.repair`).
- **Trend**: a Poisson regression of monthly fault counts on calendar time (offset:
  node-days in service), the rate ratio per 100 days with its Wald interval, and the
  Laplace test (Cox and Lewis [1]_); and the Weibull shape of the time from a repair to
  the node's next fault (< 1: early re-failure after repair, which a frailty mixture
  also produces in a pooled fleet; the two are not separated).  Node age (burn-in per node) needs install dates,
  which the InfiniteHBD trace does not give: then only the fleet's calendar trend is
  tested, and the result says so.

References
----------
.. [1] D. R. Cox and P. A. W. Lewis, *The Statistical Analysis of Series of Events*,
   Methuen, 1966, ch. 3 (the Laplace test of a trend in a Poisson process).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats

from .._summary import Results, Summary
from ..exceptions import AnalysisError
from ..telemetry.faults import PLANNED_CLASSES, check_faults
from .rates import garwood_interval
from .repair import fit_repair
from .survival import dispersion_test, fit_weibull

__all__ = ["FaultFit", "fit_faults", "node_exposure"]

DAY = pd.Timedelta(days=1)


def _outage_days(starts, ends) -> float:
    """Days a node was out: the union of its faults' intervals [d] (float days, sorted by
    start; open ones already run to the window's end)."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in zip(starts, ends):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0.0)


def _days(faults, start, end):
    """Start and end of each fault in days after ``start`` (open ends at ``end``)."""
    s = ((faults["start"] - start) / DAY).to_numpy(float)
    e = ((faults["end"].fillna(end).clip(upper=end) - start) / DAY).to_numpy(float)
    return s, e


def node_exposure(faults: pd.DataFrame, n_nodes: int, start, end) -> pd.DataFrame:
    """Per node: ``faults`` (unexpected), ``planned``, ``outage_d`` and ``exposure_d``
    (days in service) [d]; nodes without faults (``n_nodes`` minus those seen) are rows
    ``quiet-N`` with the whole window as exposure."""
    window = (end - start) / DAY
    seen = faults["node"].unique()
    if len(seen) > n_nodes:
        raise AnalysisError(f"{len(seen)} nodes have faults but the fleet has only "
                            f"{n_nodes}")
    rows = []
    known = faults["end"].notna().any()   # records without any end: outages unknown (0)
    s, e = _days(faults, start, end)
    planned = faults["fault_class"].isin(PLANNED_CLASSES).to_numpy()
    for node, idx in faults.groupby("node", sort=True).indices.items():
        out = _outage_days(s[idx], e[idx]) if known else 0.0
        rows.append({"node": node, "faults": int((~planned[idx]).sum()),
                     "planned": int(planned[idx].sum()), "outage_d": out,
                     "exposure_d": max(window - out, 1e-9)})
    quiet = [{"node": f"quiet-{i}", "faults": 0, "planned": 0, "outage_d": 0.0,
              "exposure_d": window} for i in range(n_nodes - len(seen))]
    return pd.DataFrame(rows + quiet)


@dataclass(frozen=True, repr=False)
class FaultFit(Results):
    """Node hazards fitted to fault records (see :func:`fit_faults`).

    Attributes
    ----------
    class_rates : pandas.DataFrame
        Per fault class (and ``unexpected``, ``planned`` totals): ``faults``,
        ``rate_per_node_day`` with ``lower``/``upper``, ``share`` [-].
    frailty : pandas.DataFrame
        One row: score test, NB2 frailty variance ``theta`` with its se, LR p-value.
    lemons : pandas.DataFrame
        Nodes with at least k faults: observed, expected under Poisson and under the
        gamma frailty.
    repair : pandas.DataFrame
        Repair models, best AIC first (:func:`powerlab.reliability.repair.fit_repair`).
    trend : pandas.DataFrame
        One row: rate ratio per 100 days with its interval and p-value, Laplace
        statistic and p-value, and ``node_age`` (whether node age was available).
    n_nodes : int
    days : float
        Observation window [d].
    exposure_node_days : float
        Node-days in service [node d].
    repair_durations_d : numpy.ndarray
        Completed repair durations [d] (the simulation resamples them).
    source : str
    """

    class_rates: pd.DataFrame
    frailty: pd.DataFrame
    lemons: pd.DataFrame
    repair: pd.DataFrame
    trend: pd.DataFrame
    n_nodes: int
    days: float
    exposure_node_days: float
    repair_durations_d: np.ndarray = field(repr=False)
    source: str = ""

    @property
    def rate_per_node_day(self) -> float:
        """Unexpected faults per node-day in service [1/(node d)]."""
        return float(self.class_rates.loc["unexpected", "rate_per_node_day"])

    @property
    def theta(self) -> float:
        """Gamma frailty variance of the node rates [-] (0: homogeneous Poisson)."""
        return float(self.frailty["theta"].iloc[0])

    def params(self) -> dict:
        """The numbers a plan needs, as plain values (written to ``fit.json``)."""
        r = self.class_rates.loc["unexpected"]
        p = self.class_rates.loc["planned"]
        best = self.repair.iloc[0]
        return {"source": self.source, "n_nodes": self.n_nodes, "days": self.days,
                "exposure_node_days": self.exposure_node_days,
                "faults": int(r["faults"]),
                "rate_per_node_day": float(r["rate_per_node_day"]),
                "rate_lower": float(r["lower"]), "rate_upper": float(r["upper"]),
                "planned_faults": int(p["faults"]),
                "planned_rate_per_node_day": float(p["rate_per_node_day"]),
                "theta": self.theta, "theta_se": float(self.frailty["theta_se"].iloc[0]),
                "frailty_lr_p_value": float(self.frailty["lr_p_value"].iloc[0]),
                "repair_model": str(best["model"]),
                "repair_shape": float(best["shape"]),
                "repair_scale_d": float(best["scale_d"]),
                "repair_mean_d": float(best["mean_d"]),
                "repair_median_d": float(best["median_d"])}

    def summary_frame(self) -> pd.DataFrame:
        """The rates by class (:attr:`class_rates`)."""
        return self.class_rates

    def summary(self) -> Summary:
        """Rates, frailty test, repair model and trend in a few lines."""
        p = self.params()
        fr = self.frailty.iloc[0]
        tr = self.trend.iloc[0]
        rep = self.repair.iloc[0]
        s = Summary("Node fault fit")
        s.add_text([
            f"{p['faults']} unexpected faults ({p['planned_faults']} planned) on "
            f"{self.n_nodes} nodes over {self.days:g} d: "
            f"{p['rate_per_node_day'] * 1e3:.2f} per 1,000 node-days "
            f"[{p['rate_lower'] * 1e3:.2f}, {p['rate_upper'] * 1e3:.2f}]",
            f"frailty (lemon nodes): theta {fr['theta']:.2f} +- {fr['theta_se']:.2f}, "
            f"LR test vs homogeneous Poisson p {fr['lr_p_value']:.2g}; score "
            f"{fr['score']:.1f} (p {fr['score_p_value']:.2g})",
            f"repair: {rep['model']} (best AIC), median {rep['median_d']:.2f} d "
            f"[{rep['median_lower_d']:.2f}, {rep['median_upper_d']:.2f}], mean "
            f"{rep['mean_d']:.2f} d [{rep['mean_lower_d']:.2f}, {rep['mean_upper_d']:.2f}]",
            f"trend: rate ratio per 100 d {tr['rate_ratio_per_100d']:.2f} "
            f"[{tr['lower']:.2f}, {tr['upper']:.2f}] (p {tr['p_value']:.2g}; Laplace p "
            f"{tr['laplace_p_value']:.2g}); time from repair to next fault: Weibull "
            f"shape {tr['post_repair_shape']:.2f} [{tr['post_repair_shape_lower']:.2f}, "
            f"{tr['post_repair_shape_upper']:.2f}]; {tr['note']}"])
        s.add_df(self.class_rates)
        return s

    def write(self, out) -> list:
        """Write ``class_rates.csv``, ``frailty.csv``, ``lemons.csv``, ``repair.csv``,
        ``trend.csv``, ``repair_durations.csv`` and ``fit.json`` into folder ``out``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        files = []
        for name in ("class_rates", "frailty", "lemons", "repair", "trend"):
            f = out / f"{name}.csv"
            getattr(self, name).to_csv(f, index=name in ("class_rates", "lemons"))
            files.append(f)
        f = out / "repair_durations.csv"
        pd.DataFrame({"repair_d": self.repair_durations_d}).to_csv(f, index=False)
        files.append(f)
        f = out / "fit.json"
        f.write_text(json.dumps(self.params(), indent=1))
        return files + [f]


def _class_rates(faults, exposure, conf):
    counts = faults["fault_class"].value_counts()
    planned = counts.reindex(list(PLANNED_CLASSES), fill_value=0).sum()
    unexpected = counts.drop(list(PLANNED_CLASSES), errors="ignore")
    k = pd.concat([unexpected.sort_values(ascending=False),
                   pd.Series({"unexpected": unexpected.sum(), "planned": planned})])
    k = k.astype(int)
    lo, hi = garwood_interval(k.to_numpy(), exposure, conf)
    return pd.DataFrame({"faults": k.to_numpy(), "rate_per_node_day": k.to_numpy() /
                         exposure, "lower": lo, "upper": hi,
                         "share": k.to_numpy() / max(int(unexpected.sum()), 1)},
                        index=pd.Index(k.index.astype(str), name="fault_class"))


def _frailty(nodes: pd.DataFrame):
    d = dispersion_test(nodes, count="faults", unit="node", exposure="exposure_d")
    theta = d.frailty_var
    frail = pd.DataFrame([{"score": d.score, "score_p_value": d.p_value, "theta": theta,
                           "theta_se": d.frailty_se, "lr_p_value": d.lr_p_value,
                           "n_nodes": d.n_units, "faults": d.n_failures}])
    lam = nodes["faults"].sum() / nodes["exposure_d"].sum()
    mu = lam * nodes["exposure_d"].to_numpy()
    rows = []
    for k in (1, 2, 5, 10):
        pois = float(np.sum(stats.poisson.sf(k - 1, mu)))
        if theta > 0:
            r = 1 / theta
            nb = float(np.sum(stats.nbinom.sf(k - 1, r, r / (r + mu))))
        else:
            nb = pois
        rows.append({"at_least": k, "observed": int((nodes["faults"] >= k).sum()),
                     "expected_poisson": pois, "expected_frailty": nb})
    return frail, pd.DataFrame(rows).set_index("at_least")


def _post_repair(faults, start, end, conf):
    """Weibull shape of the time from a repair to the node's next unexpected fault
    (spells after a repair; the last one censored at ``end``)."""
    s, e = _days(faults, start, end)
    unexpected = ~faults["fault_class"].isin(PLANNED_CLASSES).to_numpy()
    last = (end - start) / DAY
    rows = []
    for idx in faults.groupby("node", sort=False).indices.values():
        cursor = None
        for i in idx:                      # faults of a node come sorted by start
            if cursor is not None and s[i] > cursor:
                rows.append((s[i] - cursor, bool(unexpected[i])))
            cursor = e[i] if cursor is None else max(cursor, e[i])
        if cursor is not None and cursor < last:
            rows.append((last - cursor, False))
    spells = pd.DataFrame(rows, columns=["duration_s", "failed"])
    spells["duration_s"] *= 86400.0
    try:
        w = fit_weibull(spells, conf=conf).summary_frame().loc["log_shape"]
    except AnalysisError:
        return np.nan, np.nan, np.nan, len(spells)
    return float(np.exp(w["estimate"])), float(np.exp(w["lower"])), \
        float(np.exp(w["upper"])), len(spells)


def _trend(faults, nodes, start, end, conf, node_age: bool):
    ev = faults[~faults["fault_class"].isin(PLANNED_CLASSES)]
    days = (end - start) / DAY
    t = ((ev["start"] - start) / DAY).to_numpy(float)
    edges = np.linspace(0, days, max(int(round(days / 30.4)), 2) + 1)
    k, _ = np.histogram(t, edges)
    # exposure per bin: the fleet's node-days in service, spread evenly (outages ~2 %)
    expo = np.diff(edges) * nodes["exposure_d"].sum() / days
    mid = (edges[:-1] + edges[1:]) / 2 / 100.0
    fit = sm.GLM(k, sm.add_constant(mid), family=sm.families.Poisson(),
                 offset=np.log(expo)).fit()
    z = stats.norm.ppf(0.5 + conf / 2)
    b, se = float(fit.params[1]), float(fit.bse[1])
    lap = (t.mean() - days / 2) / (days * np.sqrt(1 / (12 * len(t))))
    note = ("node age known: burn-in tested per node" if node_age else
            "node install dates not in the record: burn-in per node not estimable; the "
            "fleet's calendar trend is what is tested")
    k_sh, k_lo, k_hi, n_sp = (_post_repair(faults, start, end, conf) if faults["end"].notna().any()
                              else (np.nan, np.nan, np.nan, 0))
    return pd.DataFrame([{"rate_ratio_per_100d": np.exp(b), "lower": np.exp(b - z * se),
                          "upper": np.exp(b + z * se), "p_value": float(fit.pvalues[1]),
                          "laplace_z": lap, "laplace_p_value": 2 * stats.norm.sf(abs(lap)),
                          "months": len(k), "post_repair_shape": k_sh,
                          "post_repair_shape_lower": k_lo, "post_repair_shape_upper": k_hi,
                          "post_repair_spells": n_sp, "note": note +
                          "; post-repair Weibull shape < 1 (early re-failure) is also what "
                          "frailty alone gives a pooled fleet: not separated here"}])


def fit_faults(faults: pd.DataFrame, *, n_nodes: int, start=None, end=None,
               conf: float = 0.95, seed: int = 0, source: str = "") -> FaultFit:
    """Fit node hazards, frailty, repair times and trend to a fault table.

    Parameters
    ----------
    faults : pandas.DataFrame
        The fault table (:data:`powerlab.telemetry.faults.FAULT_COLUMNS`).
    n_nodes : int
        Nodes observed, faulty or not [-].
    start, end : pandas.Timestamp, optional
        Observation window [UTC]; default the first fault's day and the last time seen.
    conf : float, default 0.95
    seed : int, default 0
        Seed of the repair bootstrap.
    source : str
        Where the records come from (kept in the result).

    Returns
    -------
    FaultFit
    """
    f = check_faults(faults, name=source or None)
    if len(f) < 5:
        raise AnalysisError(f"{len(f)} fault records are too few to fit")
    start = f["start"].min().floor("D") if start is None else pd.Timestamp(start)
    end = (max(f["start"].max(), f["end"].max()) if end is None else pd.Timestamp(end))
    if (f["start"] < start).any() or (f["start"] > end).any():
        raise AnalysisError("fault starts fall outside the observation window "
                            f"{start} .. {end}")
    nodes = node_exposure(f, n_nodes, start, end)
    exposure = float(nodes["exposure_d"].sum())
    rates = _class_rates(f, exposure, conf)
    frail, lemons = _frailty(nodes)
    closed = f["end"].notna()
    dur = ((f["end"].fillna(end) - f["start"]) / DAY).to_numpy(float)
    if closed.sum() >= 3:
        repair = fit_repair(dur, closed.to_numpy(), conf=conf, seed=seed)
    else:       # kernel logs and sacct record no repairs
        repair = pd.DataFrame([{"model": "not estimable", "shape": np.nan,
                                "scale_d": np.nan, "median_d": np.nan, "mean_d": np.nan,
                                "median_lower_d": np.nan, "median_upper_d": np.nan,
                                "mean_lower_d": np.nan, "mean_upper_d": np.nan,
                                "n": len(f), "n_censored": int((~closed).sum()),
                                "note": f"{int(closed.sum())} repairs with an end: repair "
                                        "times need records with ends"}])
    trend = _trend(f, nodes, start, end, conf, node_age=False)
    return FaultFit(rates, frail, lemons, repair, trend, int(n_nodes),
                    float((end - start) / DAY), exposure, dur[closed.to_numpy()],
                    source)
