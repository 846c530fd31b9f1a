"""The one summary type every results object's ``summary()`` returns, and the one base
class of results objects (:class:`Results`).

Modelled on statsmodels' ``statsmodels.iolib.summary.Summary``: a title, tables and
extra text, rendered as plain text (``as_text()``, ``str()``, ``print()``) or HTML
(``as_html()``, ``_repr_html_`` for JupyterLab).  A results object builds one in its
``summary()`` and keeps its tables in ``summary_frame()``; the blocks are rendered in
the order they were added, separated by a blank line.

Examples
--------
>>> import pandas as pd
>>> s = Summary("Fit")
>>> s.add_df(pd.DataFrame({"value": [1.5]}, index=["step_time_s"]), header=False)
>>> s.add_text(["Note: synthetic."])
>>> print(s)
Fit
===
step_time_s 1.5
<BLANKLINE>
Note: synthetic.

References
----------
.. [1] statsmodels, ``statsmodels/iolib/summary.py``, class ``Summary``.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import pandas as pd

__all__ = ["Results", "Summary"]


@dataclass
class _Table:
    frame: pd.DataFrame
    title: str | None
    header: bool
    index: bool


@dataclass
class _Text:
    lines: list[str]
    pre: bool


@dataclass(eq=False)
class Summary:
    """Title, tables and text of a results object, as text and HTML.

    Parameters
    ----------
    title : str
        First line, underlined with ``=`` in text and a heading in HTML; empty for none.
    float_format : str
        Format of floats in the tables (``str.format`` spec such as ``"{:,.3f}"``).
    width : int
        Display width of the text tables [characters].
    max_rows : int
        Most table rows shown in text.
    """

    title: str = ""
    float_format: str = "{:,.4g}"
    width: int = 140
    max_rows: int = 60
    blocks: list = field(default_factory=list)

    # -- building ------------------------------------------------------------------
    def add_df(self, frame: pd.DataFrame | pd.Series, title: str | None = None, *,
               header: bool = True, index: bool = True) -> None:
        """Add a table (a Series becomes one column)."""
        if isinstance(frame, pd.Series):
            frame = frame.to_frame()
        self.blocks.append(_Table(frame, title, header, index))

    def add_text(self, lines, *, pre: bool = False) -> None:
        """Add lines of text (a string is one or more lines); ``pre`` keeps them
        preformatted (monospace) in HTML."""
        if isinstance(lines, str):
            lines = lines.split("\n")
        self.blocks.append(_Text(list(lines), pre))

    # aliases of statsmodels' names
    def add_extra_txt(self, lines) -> None:
        """Add notes below the tables (statsmodels' name for :meth:`add_text`)."""
        self.add_text(lines)

    @property
    def tables(self) -> list[pd.DataFrame]:
        """The tables, in order."""
        return [b.frame for b in self.blocks if isinstance(b, _Table)]

    @property
    def extra_txt(self) -> list[str]:
        """All text lines, in order."""
        return [s for b in self.blocks if isinstance(b, _Text) for s in b.lines]

    # -- rendering -----------------------------------------------------------------
    def _ctx(self):
        return pd.option_context("display.width", self.width, "display.max_columns", 30,
                                 "display.max_rows", self.max_rows,
                                 "display.float_format", self.float_format.format)

    def as_text(self) -> str:
        """Plain text: the title underlined, then each block, separated by blank lines."""
        head = [self.title, "=" * len(self.title)] if self.title else []
        parts = []
        with self._ctx():
            for b in self.blocks:
                if isinstance(b, _Text):
                    parts.append("\n".join(b.lines))
                    continue
                txt = (b.frame.to_string(header=b.header, index=b.index) if len(b.frame)
                       or len(b.frame.columns) else "(none)")
                parts.append(f"{b.title}\n{txt}" if b.title else txt)
        return "\n".join(head + ["\n\n".join(parts)] if parts else head)

    def as_html(self) -> str:
        """HTML: a heading, each table as an HTML table, text as paragraphs."""
        fmt = self.float_format.format
        out = [f"<h4>{html.escape(self.title)}</h4>"] if self.title else []
        for b in self.blocks:
            if isinstance(b, _Text):
                if b.pre:
                    out.append("<pre>" + html.escape("\n".join(b.lines)) + "</pre>")
                else:
                    out += [f"<p>{html.escape(s)}</p>" for s in b.lines if s]
                continue
            if b.title:
                out.append(f"<p>{html.escape(b.title)}</p>")
            out.append(b.frame.to_html(header=b.header, index=b.index, float_format=fmt))
        return "<div>" + "".join(out) + "</div>"

    def __str__(self) -> str:
        return self.as_text()

    def __repr__(self) -> str:
        return self.as_text()

    def _repr_html_(self) -> str:
        return self.as_html()

    def __contains__(self, text: str) -> bool:
        """``"x" in summary``: whether the text rendering contains ``x``."""
        return text in self.as_text()


class Results:
    """Base class of every powerlab results object (statsmodels ``base/model.py``
    ``Results``): the display lives here, once.

    A subclass implements :meth:`summary` (a :class:`Summary`: text, and HTML in
    JupyterLab) and :meth:`summary_frame` (its numbers as a tidy frame, the natural
    shape for a CSV).  ``str(result)`` and ``print(result)`` give the summary's text,
    ``_repr_html_`` its HTML; ``repr(result)`` is the one-line :meth:`_repr_line` where the
    subclass has one, else the summary's text.  A subclass that is a dataclass declares
    ``@dataclass(repr=False)`` so that these reprs are not replaced by the generated one.

    References
    ----------
    .. [1] statsmodels, ``statsmodels/base/model.py``, class ``Results``, and
       ``statsmodels/iolib/summary.py``, class ``Summary``.
    """

    def summary(self) -> Summary:
        """Title, tables and notes of the result (text; HTML in JupyterLab)."""
        raise NotImplementedError(f"{type(self).__name__} has no summary()")

    def summary_frame(self) -> pd.DataFrame:
        """The result's numbers as a tidy frame."""
        raise NotImplementedError(f"{type(self).__name__} has no summary_frame()")

    def _repr_line(self) -> str | None:
        """A one-line ``repr`` (``<Kind name: key figures>``), or None for the summary."""
        return None

    def __str__(self) -> str:
        return self.summary().as_text()

    def __repr__(self) -> str:
        line = self._repr_line()
        return line if line is not None else self.summary().as_text()

    def _repr_html_(self) -> str:
        return self.summary().as_html()
