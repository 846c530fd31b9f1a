"""The page's building blocks: escaped text, numbers and tables as HTML.

Every string that comes from the inputs (scenario and spec names, sources, notes) goes
through :func:`esc`; tables are plain ``<table>`` elements that the page's print CSS
keeps whole across pages.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

__all__ = ["esc", "num", "table"]


def esc(x) -> str:
    """``x`` as HTML-escaped text (quotes too)."""
    return html.escape(str(x), quote=True)


def num(v, fmt="{:.3g}") -> str:
    """A cell: yes/no for a bool, ``n/a`` for a non-finite number, else ``fmt``."""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, float, np.floating, np.integer)):
        return "n/a" if not math.isfinite(float(v)) else fmt.format(float(v))
    return esc(v)


def table(df: pd.DataFrame, fmt: dict | None = None, index: bool = False) -> str:
    """A frame as an HTML table (numbers right-aligned, ``fmt``: column -> format)."""
    fmt = fmt or {}
    d = df.reset_index() if index else df
    head = "".join(f"<th>{esc(c).replace('_', '_<wbr>')}</th>" for c in d.columns)
    body = []
    for _, row in d.iterrows():
        cells = []
        for c in d.columns:
            v = row[c]
            is_num = isinstance(v, (int, float, np.floating, np.integer)) and \
                not isinstance(v, (bool, np.bool_))
            cells.append(f"<td class='n'>{num(v, fmt.get(c, '{:.4g}'))}</td>" if is_num
                         else f"<td>{num(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
