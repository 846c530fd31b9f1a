"""Can a forecast of this scenario assess this requirement spec?  Asked before any search.

A mitigation search that cannot show a requirement met searches in vain: a 3-30 Hz band
at a 0.1-s tick (Nyquist 5 Hz), a ride-through requirement without a voltage sag in the
scenario.  :func:`assess` answers from the scenario and the spec alone (no engine run):
for each requirement whether a forecast at the tick can show it met, the largest tick at
which all can (:func:`needed_tick_s`), whether that tick fits the horizon
(``max_ticks_per_draw``), and the command-line arguments that make it assessable.

The tick-dependent rules are :meth:`Compliance.plan`'s (one place); a ride-through
requirement needs a voltage sag in the scenario's ``disturbances`` (or given as measured
sags) no deeper and no longer than the requirement's, with a second of forecast before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

__all__ = ["NICE_TICKS_S", "Assessability", "assess", "needed_tick_s"]

#: Ticks ``--tick-s auto`` chooses from, coarsest first [s].
NICE_TICKS_S = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)

#: Largest horizon a search runs at, in ticks per draw (about 80 MB per per-job series
#: and draw; the 24-h, 16k-GPU site at 0.01 s is 8.64 million) [-].
MAX_TICKS_PER_DRAW = 10_000_000


@dataclass
class Assessability:
    """What :func:`assess` found.

    Attributes
    ----------
    tick_s : float
        The tick asked about [s].
    duration_s : float
        Horizon [s].
    reasons : dict
        ``{requirement: why a forecast at tick_s cannot show it met}``; empty when all can.
    needed_tick_s : float or None
        Largest tick of :data:`NICE_TICKS_S` at which every tick-dependent requirement can
        be assessed (None: none can) [s].
    args : list of str
        Command-line arguments that make the spec assessable (``--tick-s 0.01``,
        ``--hours 24``, ``--sags SAGS.csv``); empty when nothing can.
    blockers : list of str
        What neither an argument nor a scenario edit fixes.
    edits : list of str
        Scenario edits the spec needs (a voltage sag for a ride-through requirement).
    """

    tick_s: float
    duration_s: float
    reasons: dict = field(default_factory=dict)
    needed_tick_s: float | None = None
    args: list = field(default_factory=list)
    blockers: list = field(default_factory=list)
    edits: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether a forecast at ``tick_s`` can assess every requirement."""
        return not self.reasons

    def command(self, scenario="SCENARIO.yaml", requirements="REQ.yaml", out="OUT") -> str:
        """The ``powerlab size-mitigation`` command that can assess the spec."""
        return " ".join(["powerlab size-mitigation", str(scenario), "--requirements",
                         str(requirements), "--out", str(out), *self.args])

    def text(self, **command_kw) -> str:
        """Reasons and the command, for summaries."""
        lines = [f"{k}: {v}" for k, v in self.reasons.items()]
        lines += [f"cannot be assessed at all: {b}" for b in self.blockers]
        lines += [f"needs a scenario edit: {e}" for e in self.edits]
        if not self.blockers:
            lines.append(("then run: " if self.edits else "run: ")
                         + self.command(**command_kw))
        return "\n".join(lines)


def _tick_reasons(check, tick_s: float, duration_s: float) -> dict:
    out = {}
    for r in check.spec.requirements:
        if r.kind == "ride_through":
            continue
        status, note = check.plan(tick_s, tick_s, duration_s)[r.name]
        if status != "ok":
            out[r.name] = note or f"cannot be shown met at a {tick_s:g}-s tick"
    return out


def needed_tick_s(check, duration_s: float, start_tick_s: float | None = None
                  ) -> float | None:
    """Largest tick of :data:`NICE_TICKS_S` (not above ``start_tick_s`` when given) at
    which a forecast can assess every tick-dependent requirement [s]; None if none."""
    for t in NICE_TICKS_S:
        if start_tick_s is not None and t > start_tick_s * (1 + 1e-9):
            continue
        if not _tick_reasons(check, t, duration_s):
            return t
    return None


def _covered_sags(scenario, check, req, start, end) -> int:
    # only the scenario's own sags: the engine forecasts what those do to the site;
    # measured sags (--sags) carry no site response a forecast could be judged by
    rows = [(s.at_utc, s.duration_s, s.residual_voltage_pu)
            for s in getattr(scenario, "disturbances", ())]
    n = 0
    for at, dur, res in rows:
        at = pd.Timestamp(at)
        if (res >= req.residual_voltage_pu - 1e-12 and dur <= req.window_s + 1e-12
                and at - pd.Timedelta(seconds=1) >= start
                and at + pd.Timedelta(seconds=dur + req.observe_s) <= end):
            n += 1
    return n


def _horizon(out: Assessability, duration_s: float, tick_s: float, max_ticks: int) -> None:
    """Add ``--hours`` (0.1-h steps) when the horizon at ``tick_s`` exceeds the budget."""
    ticks = duration_s / tick_s
    if ticks <= max_ticks:
        return
    hours = math.floor(max_ticks * tick_s / 360.0) / 10.0
    if hours <= 0:
        out.blockers.append(f"even 0.1 h at {tick_s:g} s exceeds {max_ticks:.3g} ticks "
                            "per draw")
        return
    out.args += ["--hours", f"{hours:g}"]
    out.reasons["horizon"] = (f"{duration_s / 3600:g} h at {tick_s:g} s is {ticks:.3g} "
                              f"ticks per draw, over the {max_ticks:.3g} a search runs at: "
                              f"assess the first {hours:g} h")


def assess(scenario, check, tick_s: float | None = None, *,
           max_ticks_per_draw: int = MAX_TICKS_PER_DRAW) -> Assessability:
    """Whether a forecast of ``scenario`` at ``tick_s`` can assess ``check``'s spec.

    Parameters
    ----------
    scenario : Scenario
    check : Compliance
    tick_s : float, optional
        Engine tick (default the scenario's) [s].
    max_ticks_per_draw : int
        Largest horizon, in ticks, a search is run at [-].

    Returns
    -------
    Assessability
    """
    tick = float(tick_s or scenario.tick_s)
    start, end = pd.Timestamp(scenario.start_utc), pd.Timestamp(scenario.end_utc)
    duration = (end - start).total_seconds()
    out = Assessability(tick, duration)
    out.reasons.update(_tick_reasons(check, tick, duration))
    need = needed_tick_s(check, duration)
    out.needed_tick_s = need
    if out.reasons:
        if need is None:
            out.blockers.append("no tick down to 1 ms can assess "
                                + ", ".join(out.reasons))
        else:
            out.args += ["--tick-s", f"{need:g}"]
            _horizon(out, duration, need, max_ticks_per_draw)
    else:
        _horizon(out, duration, tick, max_ticks_per_draw)
    for r in check.spec.requirements:
        if r.kind == "ride_through" and not _covered_sags(scenario, check, r, start, end):
            out.reasons[r.name] = (
                f"no voltage sag to >= {r.residual_voltage_pu:g} pu lasting <= "
                f"{r.window_s:g} s in the scenario's disturbances within the horizon: "
                "the load lost cannot be forecast without one"
                + (" (sags given as --sags are measurements: the forecast does not "
                   "model what they do)" if check.sags is not None else ""))
            out.edits.append(
                f"add to the scenario: disturbances: [{{name: sag_{r.name}, at_utc: <a "
                f"time in the horizon>, residual_voltage_pu: {r.residual_voltage_pu:g}, "
                f"duration_s: {r.window_s:g}, trip_fraction: <share of nodes whose "
                "supplies drop out>, ups_fraction: <share of IT load the UPS carries>}]")
    return out
