"""What a collector is asked to do: :class:`CollectorOptions`, checked once.

:class:`~powerlab.collect.collector.Collector` takes its options as one frozen
:class:`CollectorOptions` (``options=``) or, as every call written before it did, as
keywords (``Collector("store", interval_s=0.05, flush_interval_s=5)``); the defaults
exist here, once.  A bad value is refused when the options are made, before any GPU is
opened, with a :class:`~powerlab.exceptions.PowerlabError` naming the option.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .._options import Options, choice
from ..exceptions import PowerlabError
from .signals import GROUPS

__all__ = ["CollectorOptions"]


@dataclass(frozen=True)
class CollectorOptions(Options):
    """Options of a :class:`~powerlab.collect.collector.Collector`.

    Parameters
    ----------
    interval_s : float, default 0.1
        Tick interval [s].
    gpus : sequence of int, optional
        NVML indices to sample; all GPUs when None.
    flush_interval_s : float, default 10.0
        How often buffered samples are written to the store [s]; a SIGKILL loses at
        most this plus the time of one write (when writes take longer than this, at most
        two writes' time; see the collector's Faults).
    signal_intervals_s : mapping of str to float, optional
        Slower intervals for signal groups (``power``, ``temperature``, ``clocks``,
        ``utilization``, ``power_limit``) [s], rounded to a whole number of ticks; e.g.
        ``{"temperature": 1.0}``.  Columns of a group not read in a tick are NaN.
    host : str, optional
        Host name recorded with the samples (default: this machine's).
    window_s : float, default 60.0
        Length of the live window returned by :meth:`Collector.recent` [s].
    retry_backoff_s : (float, float), default (0.5, 30.0)
        First and largest wait before retrying a failed GPU [s]; doubles per failure.
    prometheus_port : int, optional
        Serve ``/metrics`` with DCGM-compatible names on this port (0: any free port).
    prometheus_addr : str, default "127.0.0.1"
        Address the metrics endpoint binds to (``"0.0.0.0"`` opens it to the network).
    writer : callable, optional
        ``writer(frame, root) -> list[Path]`` used for flushes; default
        :func:`powerlab.telemetry.store.write_store`.
    max_buffer_s : float, optional
        Most samples held in memory while the store is behind, as seconds of sampling
        [s]; newer samples are dropped and counted beyond it.  Default: the larger of
        60 s and four flush intervals (:attr:`buffer_s`).
    hang_timeout_s : float, optional
        An NVML call taking longer than this is treated as hung [s]; default the larger
        of 1 s and five intervals (:attr:`hang_s`).

    Raises
    ------
    powerlab.exceptions.PowerlabError
        A value out of range, naming the option.
    """

    interval_s: float = 0.1
    gpus: Sequence[int] | None = None
    flush_interval_s: float = 10.0
    signal_intervals_s: Mapping[str, float] | None = None
    host: str | None = None
    window_s: float = 60.0
    retry_backoff_s: tuple[float, float] = (0.5, 30.0)
    prometheus_port: int | None = None
    prometheus_addr: str = "127.0.0.1"
    writer: Callable | None = None
    max_buffer_s: float | None = None
    hang_timeout_s: float | None = None

    def __post_init__(self) -> None:
        self._check_intervals()
        self._check_gpus_and_port()
        self._check_limits()
        self.every()

    # -- derived values ------------------------------------------------------------
    @property
    def hang_s(self) -> float:
        """The hang timeout in force [s] (``hang_timeout_s`` or its default)."""
        return float(self._hang())

    @property
    def buffer_s(self) -> float:
        """The buffer bound in force [s] (``max_buffer_s`` or its default)."""
        return float(self._buffer())

    def _hang(self):
        return max(1.0, 5 * self.interval_s) if self.hang_timeout_s is None \
            else self.hang_timeout_s

    def _buffer(self):
        return max(60.0, 4 * self.flush_interval_s) if self.max_buffer_s is None \
            else self.max_buffer_s

    def every(self) -> dict[str, int]:
        """Ticks between two reads of each signal group (1: every tick)."""
        every = {g: 1 for g in GROUPS}
        for g, s in (self.signal_intervals_s or {}).items():
            choice(g, "signal_intervals_s: signal group", tuple(GROUPS))
            if not s >= self.interval_s:
                raise PowerlabError(f"signal_intervals_s[{g!r}] = {s} s is shorter than "
                                    f"interval_s = {self.interval_s} s")
            if not s < math.inf:
                raise PowerlabError(f"signal_intervals_s[{g!r}] must be a finite number of "
                                    f"seconds, got {s}")
            every[g] = max(1, round(s / self.interval_s))
        return every

    # -- checks (in the order their errors have always come) -----------------------
    def _check_intervals(self) -> None:
        if not 0 < self.interval_s < math.inf:
            raise PowerlabError(f"interval_s must be a finite number > 0 s, "
                                f"got {self.interval_s}")
        if not 0 < self.flush_interval_s < math.inf:
            raise PowerlabError(f"flush_interval_s must be a finite number > 0 s, "
                                f"got {self.flush_interval_s}")
        if not 0 < self.window_s < math.inf:
            raise PowerlabError(f"window_s must be a finite number > 0 s, got {self.window_s}")

    def _check_gpus_and_port(self) -> None:
        if self.gpus is not None:
            gpus = [int(g) for g in self.gpus]
            dup = sorted({g for g in gpus if gpus.count(g) > 1})
            if dup or any(g < 0 for g in gpus):
                raise PowerlabError(f"gpus must be distinct GPU indices >= 0, got {gpus}"
                                    + (f" (repeated: {dup})" if dup else ""))
        port = self.prometheus_port
        if port is not None and not 0 <= int(port) <= 65535:
            raise PowerlabError(f"prometheus_port must be 0..65535 (0: any free port), "
                                f"got {port}")

    def _check_limits(self) -> None:
        hang, buffer = self._hang(), self._buffer()
        if not 0 < hang < math.inf:
            raise PowerlabError(f"hang_timeout_s must be a finite number > 0 s, got {hang}")
        if not self.flush_interval_s <= buffer < math.inf:
            raise PowerlabError(f"max_buffer_s must be a finite number of seconds >= "
                                f"flush_interval_s = {self.flush_interval_s} s, got {buffer}")
        lo, hi = self.retry_backoff_s
        if not 0 < lo <= hi:
            raise PowerlabError(f"retry_backoff_s must be (first, largest) with "
                                f"0 < first <= largest, got {self.retry_backoff_s}")
