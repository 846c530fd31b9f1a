"""One table of every number a user can type on the command line: its unit, its range
and what an extreme would cost, checked while the line is parsed (exit code 2, one line).

:func:`apply` walks the built parser and gives every action whose value is a number
(``type=int``, ``type=float`` or a custom number type) the bounded type of its entry in
:data:`BOUNDS`; ``tests/system/test_hardening3.py`` fails for a numeric option without
an entry.  Text that is not a finite number is refused before any range: ``nan``,
``inf``, ``1e400`` (inf once read), ``true``, empty text, a number of more than 40
characters.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

__all__ = ["BOUNDS", "Bound", "apply", "bounded"]

DAY_S = 86400.0


@dataclass(frozen=True)
class Bound:
    """A number's unit, its closed range ``[low, high]``, whether it is whole, and what
    the far end of the range would cost (shown in the error)."""

    unit: str
    low: float
    high: float
    cost: str
    integer: bool = False
    low_open: bool = False       # low itself refused (a tick of 0)

    def describe(self) -> str:
        lo = f"more than {_num(self.low)}" if self.low_open else _num(self.low)
        unit = f" {self.unit}" if self.unit else ""
        return f"{lo} to {_num(self.high)}{unit}"


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1e5 and float(x).is_integer() else f"{x:g}"


_DRAWS = Bound("", 1, 10_000, "each draw is one simulation of the horizon; 10,000 draws "
               "of the bundled 16k-GPU scenario take hours", integer=True)
_SEED = Bound("", 0, 2**63 - 1, "none (numpy takes any seed >= 0)", integer=True)
_GPN = Bound("GPUs", 1, 1024, "none (no node holds more)", integer=True)
_TICK = Bound("s", 0, 3600, "the tick count is checked against the horizon afterwards",
              low_open=True)
_PUE = Bound("", 1, 10, "none (a PUE of 10 is already far beyond any real site)")
_BASE = Bound("W", 0, 1e10, "none (10 GW is beyond any site)")

#: ``dest`` or ``"command dest"`` -> its bound (the longer key wins).
BOUNDS: dict[str, Bound] = {
    "draws": _DRAWS, "seed": _SEED, "draw": Bound("", 0, 9_999, "none", integer=True),
    "gpus_per_node": _GPN,
    "tick_s": _TICK, "pue": _PUE, "base_load_w": _BASE,
    "collect interval_s": Bound("s", 0.001, 3600, "1 ms fills about 300 MB of store a "
                                "GPU a day", low_open=False),
    "collect duration_s": Bound("s", 0.001, 3660 * DAY_S, "none (a run of ten years)"),
    "collect flush_interval_s": Bound("s", 0.01, DAY_S, "a day's samples held in memory "
                                      "(about 2 GB for 8 GPUs at 0.1 s)"),
    "collect max_buffer_s": Bound("s", 0.1, DAY_S, "a day's samples held in memory"),
    "collect hang_timeout_s": Bound("s", 0.01, 3600, "a hung GPU unnoticed for an hour"),
    "collect signal_interval_s": Bound("s", 0.001, 3600, "as --interval-s"),
    "collect prometheus_port": Bound("", 0, 65535, "none (the TCP port range)",
                                     integer=True),
    "import n_gpus": Bound("GPUs", 1, 1_000_000, "none (a larger fleet has no one log)",
                           integer=True),
    "calibrate meter_interval": Bound("s", 0, DAY_S, "none (a reading a day)",
                                      low_open=True),
    "backtest split": Bound("", 0, 1, "none (a fraction of the run)", low_open=True),
    "demo hours": Bound("h", 0, 8784, "the forecast grows with the horizon: a year "
                        "takes hours", low_open=True),
    "aggregate workers": Bound("processes", 1, 256, "one process and --memory-limit each",
                               integer=True),
    "aggregate timeout_s": Bound("s", 0.01, DAY_S, "a wait of a day on a dead scheduler"),
    "export-grid step_s": Bound("s", 0, 3600, "none (an hour a step)", low_open=True),
    "size-mitigation hours": Bound("h", 0.01, 8784, "the search simulates every hour "
                                   "given: a year takes hours"),
    "flex hold_s": Bound("s", 1, 30 * DAY_S, "a longer window than 30 days is a "
                         "season, not a curtailment"),
    "flex response_s": Bound("s", 0, DAY_S, "none (a day to respond)"),
    "flex averaging_s": Bound("s", 0.1, DAY_S, "none (a day-long trailing mean, already "
                              "longer than any target)"),
    "study-package short_tick_s": Bound("s", 1e-4, 1, "the short window's tick count: "
                                        "300 s at 0.1 ms is 3 M ticks"),
    "study-package short_window_s": Bound("s", 1, 3600, "an hour at the default 0.01-s "
                                          "tick is 360,000 ticks a draw; 1e12 s would be "
                                          "10^14 (a hang)"),
    "study-package ride_through_draws": Bound("", 0, 1000, "each draw replays every "
                                              "disturbance (0: no ride-through table)",
                                              integer=True),
    "study-package reporting_rate": Bound("frames/s", 1, 240, "none (IEC/IEEE 60255-118-1 "
                                          "rates stop well below)", integer=True),
    "study-package f0_hz": Bound("Hz", 50, 60, "none (50 or 60 Hz)"),
    "import year": Bound("", 1970, 2100, "none (the year of kernel log lines)",
                         integer=True),
    "scale gpus": Bound("GPUs", 1, 10_000_000, "the scenario only; its forecast costs "
                        "grow with the jobs, not the GPUs", integer=True),
    "scale stagger_s": Bound("s", 0, DAY_S, "none (a day between job starts)"),
    "scale horizon_h": Bound("h", 0, 8784, "the forecast grows with the horizon: a year "
                             "takes hours", low_open=True),
    "scale failure_rate_per_gpu_h": Bound("1/GPU-h", 0, 1, "none (a failure an hour per "
                                          "GPU)"),
    "scale restart_s": Bound("s", 0, 7 * DAY_S, "none (a week to restart)"),
    "scale checkpoint_interval_s": Bound("s", 0, 7 * DAY_S, "none (a checkpoint a week)",
                                         low_open=True),
    "scale checkpoint_duration_s": Bound("s", 0, DAY_S, "none (a day-long checkpoint)"),
    "reliability nodes": Bound("nodes", 1, 1_000_000, "none", integer=True),
    "reliability gpus": Bound("GPUs", 1, 10_000_000, "the pool simulation draws per "
                              "node: 10 M GPUs take minutes", integer=True),
    "reliability days": Bound("days", 0, 3660, "the pool simulation steps through every "
                              "day: ten years take minutes", low_open=True),
    "reliability checkpoint_s": Bound("s", 0, DAY_S, "none (a day-long checkpoint)"),
    "reliability restart_s": Bound("s", 0, 7 * DAY_S, "none (a week to restart)"),
    "reliability interval_s": Bound("s", 0, 7 * DAY_S, "none (a checkpoint a week)",
                                    low_open=True),
    "reliability spares": Bound("nodes", 0, 1_000_000, "none", integer=True),
    "reliability repair_crews": Bound("crews", 1, 100_000, "none", integer=True),
    "reliability retire_after": Bound("failures", 1, 1_000_000, "none", integer=True),
    "reliability train_w": Bound("W", 0, 1e10, "none (10 GW)", low_open=True),
    "reliability checkpoint_w": Bound("W", 0, 1e10, "none (10 GW)", low_open=True),
    "reliability idle_w": Bound("W", 0, 1e10, "none (10 GW)", low_open=True),
}

_MAX_TEXT = 40


def _lookup(command: str, dest: str) -> Bound | None:
    return BOUNDS.get(f"{command} {dest}") or BOUNDS.get(dest)


def bounded(bound: Bound, parse=None):
    """An argparse type: ``parse(text)`` (default ``int`` or ``float``), then finite and
    inside ``bound``, else :class:`argparse.ArgumentTypeError` with the range and cost."""
    base = parse or (int if bound.integer else float)

    def convert(text: str):
        t = str(text).strip()
        if not t:
            raise argparse.ArgumentTypeError("is empty; a number expected")
        if len(t) > _MAX_TEXT:
            raise argparse.ArgumentTypeError(f"{t[:20]}... has {len(t)} characters; a "
                                             "number expected")
        if t.lower() in ("true", "false", "yes", "no", "on", "off"):
            raise argparse.ArgumentTypeError(f"{t!r} is a yes/no word, not a number")
        got = base(t)
        val = got[-1] if isinstance(got, tuple) else got      # GROUP=SECONDS
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            return got                          # a custom type's own value (a list)
        if not math.isfinite(val):
            raise argparse.ArgumentTypeError(f"{t!r} is not a finite number")
        if bound.integer and float(val) != int(val):
            raise argparse.ArgumentTypeError(f"{t!r} is not a whole number")
        low_bad = val <= bound.low if bound.low_open else val < bound.low
        if low_bad or val > bound.high:
            raise argparse.ArgumentTypeError(
                f"{t} is outside {bound.describe()} (at the far end: {bound.cost})")
        return got

    convert.__name__ = getattr(base, "__name__", "number")
    convert.bound = bound
    return convert


def _numeric(action) -> bool:
    t = action.type
    return t in (int, float) or getattr(t, "__name__", "") in (
        "_positive", "seed", "_signal_interval", "parse", "_non_negative")


def apply(parser: argparse.ArgumentParser, command: str = "") -> list[str]:
    """Give every numeric action of ``parser`` and its sub-parsers its bounded type;
    returns the ``"command dest"`` of numeric actions without an entry (none expected)."""
    missing: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                top = command.split(" ")[0] if command else name
                missing += apply(sub, top)
            continue
        if not _numeric(action) or getattr(action.type, "bound", None) is not None:
            continue
        b = _lookup(command, action.dest)
        if b is None:
            missing.append(f"{command} {action.dest}")
            continue
        parse = None if action.type in (int, float) else action.type
        action.type = bounded(b, parse)
    return missing
