"""Progress of long work: done/total, rate and time left on a terminal, a line per phase
in logs, nothing when quiet.

One small class for every long command (``powerlab forecast``, ``powerlab aggregate``;
any search loop can use it the same way)::

    from powerlab._progress import Progress

    with Progress(total=draws, what="forecast", unit="draw", enabled=not quiet) as bar:
        bar.announce(f"{ticks:,} ticks x {draws} draws", estimate_s=ticks * draws / 5e6)
        for d in range(draws):
            ...
            bar.update()

On a terminal (the stream is a TTY) one line is redrawn in place, at most every
``min_interval_s``: ``forecast  7/20 draws  35%  0.81 draw/s  8 s elapsed  ~16 s left``.
Elsewhere (a log file, a pipe, a notebook cell) it prints whole lines only: the
announcement, one line per :meth:`Progress.phase`, one at each tenth of the total and a
last line, so a log stays short whatever the total.  ``enabled=False`` prints nothing.
Leaving the ``with`` block by an exception (Ctrl-C included) ends the line with what was
done so far (``interrupted after 7/20 draws``) and lets the exception through, so the
caller decides what a partial result means.

In a Jupyter kernel (JupyterLab, Notebook, VS Code) with the default stream, the progress
is one output that updates in place instead: an HTML progress bar with the status line and
the announcement and phases above it (IPython's ``display(..., display_id=True)`` and
``update_display``, which every Jupyter front end draws without ipywidgets; a front end
without HTML shows the same text).  ``stream=`` or ``notebook=False`` keep the text.

Only the standard library is used (IPython only inside a running kernel, where it is
loaded already), so any wing may import it (a base module, like
:mod:`powerlab.exceptions`).
"""

from __future__ import annotations

import contextlib
import contextvars
import html
import os
import sys
import threading
import time

__all__ = ["ANNOUNCE_S", "CommandProgress", "Progress", "format_duration",
           "in_jupyter_kernel", "quiet"]

_QUIET = contextvars.ContextVar("powerlab_progress_quiet", default=False)


@contextlib.contextmanager
def quiet(on: bool = True):
    """Within the block no :class:`Progress` prints anything (``--quiet`` of a command
    around a function that has no ``progress`` argument of its own)."""
    token = _QUIET.set(bool(on) or _QUIET.get())
    try:
        yield
    finally:
        _QUIET.reset(token)


def format_duration(seconds: float) -> str:
    """``"45 s"``, ``"3 min 20 s"``, ``"2 h 05 min"``: a duration for people."""
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"
    if s < 3600:
        m, r = divmod(round(s), 60)
        return f"{m} min {r:02d} s"
    h, r = divmod(round(s), 3600)
    return f"{h} h {r // 60:02d} min"


class Progress:
    """Progress of ``total`` units of work.

    Parameters
    ----------
    total : int
        Units to do (draws, files, evaluations) [-]; 0 or None when unknown (then only
        phases and the count are shown).
    what : str
        What is running, first word of every line (e.g. ``"forecast"``).
    unit : str, default "step"
        Name of one unit, singular (``"draw"``); an ``s`` is added for counts.
    enabled : bool, default True
        False prints nothing (``--quiet``, ``progress=False``).
    stream : file-like, optional
        Where to print (default ``sys.stderr``, so standard output stays the result).
    tty : bool, optional
        Redraw one line in place; default: whether ``stream`` is a terminal.
    min_interval_s : float, default 0.2
        Shortest time between two redraws on a terminal [s].
    clock : callable, optional
        Monotonic clock [s] (default :func:`time.monotonic`).
    notebook : bool, optional
        Show an HTML progress bar updated in place (a Jupyter output); default: whether
        this runs in a Jupyter kernel and no ``stream`` was given.
    """

    def __init__(self, total: int | None, what: str, unit: str = "step", *,
                 enabled: bool = True, stream=None, tty: bool | None = None,
                 min_interval_s: float = 0.2, clock=time.monotonic,
                 notebook: bool | None = None):
        self.total = int(total) if total else 0
        self.what, self.unit = what, unit
        self.enabled = bool(enabled) and not _QUIET.get()
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty()) if callable(isatty) else False
        self.tty = tty
        self.min_interval_s = float(min_interval_s)
        self._clock = clock
        self.done = 0
        self._t0 = clock()
        self._last_draw = -float("inf")
        self._next_tenth = 1
        self._open_line = False
        self.closed = False
        if notebook is None:
            notebook = stream is None and in_jupyter_kernel()
        self.notebook = bool(notebook)
        self._display = None          # the IPython display handle (notebook)
        self._said: list[str] = []    # announcement and phases (notebook)

    # -- what callers use
    def announce(self, size: str, estimate_s: float | None = None) -> None:
        """Say how big the work is before it starts (and roughly how long it may take)."""
        est = f"; about {format_duration(estimate_s)}" if estimate_s is not None else ""
        self._line(f"{self.what}: {size}{est}")

    def phase(self, name: str) -> None:
        """A named step of the work began (a line on a terminal and in logs alike)."""
        self._line(f"{self.what}: {name}")

    def set_fraction(self, fraction: float) -> None:
        """The work is ``fraction`` (0..1) done, e.g. as an engine reports it."""
        if self.total and 0.0 <= fraction <= 1.0:
            self.update(int(fraction * self.total) - self.done)

    def update(self, n: int = 1) -> None:
        """``n`` more units are done."""
        self.done += int(n)
        if not self.enabled:
            return
        now = self._clock()
        if self.notebook:
            if now - self._last_draw >= self.min_interval_s or self.done == self.total:
                self._last_draw = now
                self._show(self.status())
        elif self.tty:
            if now - self._last_draw >= self.min_interval_s or self.done == self.total:
                self._last_draw = now
                self._write("\r" + self.status() + "\033[K")
                self._open_line = True
        elif self.total:
            crossed = False
            while self._next_tenth <= 10 and self.done * 10 >= self._next_tenth * self.total:
                crossed = crossed or self.done < self.total
                self._next_tenth += 1
            if crossed:                  # one line per tenth reached (the last by close())
                self._line(self.status())

    def close(self, interrupted: bool = False) -> None:
        """End the display: a last line with the count, rate and time taken."""
        if self.closed:
            return
        self.closed = True
        tail = self.status(final=True)
        if interrupted:
            tail = (f"{self.what}: interrupted after {self.done:,}"
                    f"{f'/{self.total:,}' if self.total else ''} {self._units(self.done)}")
        self._line(tail)

    # -- formatting
    def _units(self, n: int) -> str:
        return self.unit if n == 1 else f"{self.unit}s"

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._t0

    def status(self, final: bool = False) -> str:
        """The status text: done/total, percent, rate, time elapsed and left."""
        el = self.elapsed_s
        rate = self.done / el if el > 0 else 0.0
        parts = [self.what,
                 f"{self.done:,}/{self.total:,} {self._units(self.total)}" if self.total
                 else f"{self.done:,} {self._units(self.done)}"]
        if self.total:
            parts.append(f"{100.0 * self.done / self.total:.0f}%")
        if rate > 0:
            parts.append(f"{rate:.3g} {self.unit}/s" if rate >= 1
                         else f"{1 / rate:.3g} s/{self.unit}")
        parts.append(f"{format_duration(el)} {'in all' if final else 'elapsed'}")
        if not final and self.total and 0 < self.done < self.total and rate > 0:
            parts.append(f"~{format_duration((self.total - self.done) / rate)} left")
        return "  ".join(parts)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):      # a closed pipe: progress is never fatal
            self.enabled = False

    def _show(self, status: str, final: bool = False) -> None:
        """Draw (or redraw in place) the notebook output: lines said, bar, status."""
        said = "".join(f"<div>{html.escape(t)}</div>" for t in self._said)
        bar = "" if final or not self.total else (
            f'<progress value="{min(self.done, self.total)}" max="{self.total}" '
            'style="width: 24em; vertical-align: middle"></progress> ')
        data = {"text/html": f'<div class="powerlab-progress" style="font-family: '
                             f'monospace">{said}<div>{bar}{html.escape(status)}</div></div>',
                "text/plain": "\n".join([*self._said, status])}
        try:
            from IPython.display import display, update_display

            if self._display is None:
                self._display = display(data, raw=True, display_id=True)
            else:
                update_display(data, raw=True, display_id=self._display.display_id)
        except Exception:                 # noqa: BLE001 - progress is never fatal
            self.notebook = False

    def _line(self, text: str) -> None:
        if not self.enabled:
            return
        if self.notebook:
            final = text.startswith(self.what + "  ") or "interrupted after" in text
            if not final:
                self._said.append(text)
            self._show(text if final else self.status(), final=final)
            return
        prefix = "\r\033[K" if (self.tty and self._open_line) else ""
        self._open_line = False
        self._write(prefix + text + "\n")

    def __enter__(self) -> Progress:  # noqa: PYI034  (Python 3.11: no typing.Self needed)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(interrupted=exc_type is not None)


def in_jupyter_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (IPython's ``ZMQInteractiveShell``)."""
    ipy = sys.modules.get("IPython")
    if ipy is None:
        return False
    try:
        shell = ipy.get_ipython()
    except Exception:                     # noqa: BLE001
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


#: A command whose estimate reaches this says what it will do before it starts [s].
ANNOUNCE_S = 2.0


class CommandProgress:
    """The progress of one command line whose work reports none of its own.

    Where the estimate is :data:`ANNOUNCE_S` or more it says at once what it will do and
    about how long it may take, then a line at each :meth:`phase` and, while a phase
    runs, the time elapsed against the estimate (every tenth of the estimate, at least
    5 s apart; redrawn in place on a terminal); ``enabled=False`` (``--quiet``) prints
    nothing.  A Ctrl-C inside the block prints what was kept: the ``outputs`` files (or
    the files under ``outputs`` folders) written since the command started, or that
    nothing was written; the KeyboardInterrupt goes on (the command line says
    ``interrupted`` and exits 130)::

        with CommandProgress("calibrate", f"{n:,} readings of {k} files",
                             estimate_s=n / 2e6, enabled=not quiet,
                             outputs=[args.out]) as bar:
            bar.phase("reading")
            ...
    """

    def __init__(self, what: str, plan: str, estimate_s: float | None, *,
                 enabled: bool = True, outputs=(), stream=None, clock=time.monotonic):
        self.what, self.plan, self.estimate_s = what, plan, estimate_s
        self.quiet = not enabled or _QUIET.get()
        shown = (not self.quiet and estimate_s is not None and estimate_s >= ANNOUNCE_S)
        self.bar = Progress(0, what, enabled=shown, stream=stream, clock=clock)
        self.outputs = [os.fspath(o) for o in outputs]
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._t_wall = time.time()

    def __enter__(self) -> CommandProgress:  # noqa: PYI034
        self.bar.announce(self.plan, self.estimate_s)
        if self.bar.enabled:
            self._beat = threading.Thread(target=self._beating, daemon=True,
                                          name=f"powerlab {self.what} progress")
            self._beat.start()
        return self

    def phase(self, name: str) -> None:
        """A named step began (``"reading 3 files"``, ``"writing the package"``)."""
        self.bar.phase(name)

    def _beating(self) -> None:
        every = max(5.0, (self.estimate_s or 50.0) / 10)
        while not self._stop.wait(every):
            el = self.bar.elapsed_s
            left = ""
            if self.estimate_s and el < self.estimate_s:
                left = f", about {format_duration(self.estimate_s - el)} left by the estimate"
            elif self.estimate_s:
                left = ", longer than estimated"
            text = f"{self.what}: {format_duration(el)} elapsed{left}"
            if self.bar.tty:
                self.bar._write("\r" + text + "\033[K")
                self.bar._open_line = True
            else:
                self.bar._line(text)

    def kept(self) -> list[str]:
        """The output files written since the command started."""
        out = []
        for o in self.outputs:
            paths = ([os.path.join(d, f) for d, _, fs in os.walk(o) for f in fs]
                     if os.path.isdir(o) else [o])
            for p in paths:
                try:
                    if os.path.getmtime(p) >= self._t_wall - 1.0:
                        out.append(p)
                except OSError:
                    pass
        return sorted(out)

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(1.0)
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            kept = self.kept()
            names = ", ".join(os.path.basename(k) for k in kept[:6])
            more = f" and {len(kept) - 6} more" if len(kept) > 6 else ""
            said = (f"kept the {len(kept)} file(s) written before it: {names}{more}"
                    if kept else "nothing was written")
            if not self.quiet:
                self.bar.enabled = True
                self.bar._line(f"{self.what}: interrupted after "
                               f"{format_duration(self.bar.elapsed_s)}; {said}")
        elif exc_type is None and self.bar.enabled:
            self.bar._line(f"{self.what}: done in {format_duration(self.bar.elapsed_s)}")
