"""Build the documentation (HTML) and sort the build's warnings.

    python docs/build.py [--out DIR] [-j N]

Exit status 1 when the build fails or any warning is *fatal*: an object autodoc or
autosummary cannot import or find, a page missing from the toctrees, an extension error.
Every other warning is about the style of a docstring or of a page (reST markup, numpydoc
validation: parameters not documented or documented but absent, no docstring): it is
reported, counted by source file and by kind, and does not fail the build.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

#: Warnings that fail the build: the reference would miss or misname something.
FATAL = re.compile(
    r"failed to import|autodoc\.import_object|autosummary.*(failed|not found)|"
    r"no module named|module .* has no attribute|does not resolve|"
    r"toctree contains reference to non-?existing document|"
    r"document isn't included in any toctree|"
    r"Extension error|Exception occurred|ApiError",
    re.IGNORECASE)
_START = re.compile(r"\b(WARNING|ERROR|CRITICAL|SEVERE):")
_LOCATION = re.compile(r"^(?P<path>[^: ][^:]*):(?P<rest>.*?) (?:WARNING|ERROR|CRITICAL|SEVERE):")
_KIND = re.compile(r"\[(?P<kind>[\w.]+)\]\s*$")
_VALIDATED = re.compile(r"docstring for '(?P<name>[\w.]+)'")
_NAMED_FILE = re.compile(r" in (?P<path>/\S+?\.py)\.(?: \[[\w.]+\])?$")  # numpydoc's own
_CHECK = re.compile(r"^\s+(?P<code>[A-Z]{2}\d\d):")


def _file_of(obj: object) -> Path | None:
    try:
        return Path(inspect.getsourcefile(inspect.unwrap(getattr(obj, "fget", obj))))
    except (TypeError, OSError, ValueError):
        return None


def _object_file(dotted: str) -> Path | None:
    """The source file of the object named ``dotted`` (``powerlab.site.forecast``), or of
    the nearest object above it that has one (a dataclass field: its class)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        found = _file_of(obj)
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
            found = _file_of(obj) or found
        return found
    return None


def _summarised(page: Path, lineno: int) -> Path | None:
    """The source file of the object listed at ``lineno`` of a generated module page."""
    try:
        name = page.read_text().splitlines()[lineno - 1].strip()
    except (OSError, IndexError):
        return None
    return _object_file(f"{page.stem}.{name}")


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except (ValueError, OSError):
        return path.as_posix()


def _source(line: str) -> str:
    """The file a warning is about, relative to the repository (``<build>`` if none).

    A docstring's warning names the module file; a warning in an autosummary table of a
    generated page (the docstring's first line) and a numpydoc validation warning name the
    file of the object concerned.
    """
    validated = _VALIDATED.search(line)
    if validated:
        path = _object_file(validated.group("name"))
        return _relative(path) if path else validated.group("name")
    named = _NAMED_FILE.search(line)
    if named:
        return _relative(Path(named.group("path")))
    m = _LOCATION.match(line)
    if not m:
        return "<build>"
    path = Path(m.group("path"))
    summary = re.match(r"(\d+):<autosummary>", m.group("rest"))
    if summary and path.parent.name == "api":
        path = _summarised(path, int(summary.group(1))) or path
    return _relative(path)


def _records(lines: list[str]) -> list[list[str]]:
    """The warnings of a warning file: each its first line and its continuation lines."""
    records: list[list[str]] = []
    for line in lines:
        if _START.search(line):
            records.append([line])
        elif records and line.strip():
            records[-1].append(line)
    return records


def classify(lines: list[str]) -> tuple[list[str], Counter]:
    """``(fatal warnings, Counter of the other warnings by (source file, kind))``.

    The kind is Sphinx's warning type (``docutils``, ``ref.python``...) or, for numpydoc's
    validation, its check code (``PR01``...); a validation warning counts once per check.
    """
    fatal, style, seen = [], Counter(), set()
    for record in _records(lines):
        text = "\n".join(record)
        if text in seen:                  # numpydoc parses some docstrings twice
            continue
        seen.add(text)
        if FATAL.search(text):
            fatal.append(text)
            continue
        source = _source(record[0])
        checks = [m.group("code") for m in map(_CHECK.match, record[1:]) if m]
        if checks:
            for code in checks:
                style[source, f"numpydoc {code}"] += 1
        else:
            kind = _KIND.search(record[0])
            style[source, kind.group("kind") if kind else "other"] += 1
    return fatal, style


def build(out: Path, jobs: int = 2, quiet: bool = True) -> tuple[int, list[str], Counter]:
    """Run Sphinx into ``out``: ``(sphinx exit status, fatal warnings, style counts)``."""
    from sphinx.cmd.build import build_main

    out.mkdir(parents=True, exist_ok=True)
    warnfile = out / "warnings.txt"
    args = ["-b", "html", "-j", str(jobs), "-E", "-w", str(warnfile),
            "-d", str(out / ".doctrees"), str(HERE), str(out / "html")]
    if quiet:
        args[:0] = ["-q", "--no-color"]
    status = build_main(args)
    lines = warnfile.read_text().splitlines() if warnfile.exists() else []
    fatal, style = classify(lines)
    return status, fatal, style


def report(status: int, fatal: list[str], style: Counter, by_file: bool = True) -> str:
    """A short text report of one build: the fatal warnings, the others counted."""
    files, kinds = Counter(), Counter()
    for (src, kind), n in style.items():
        files[src] += n
        kinds[kind] += n
    lines = [f"sphinx exit status {status}"
             + (" (the build failed: Sphinx's message is above)" if status else "")
             + f"; {len(fatal)} fatal warning(s); {sum(style.values())} style warning(s)"
             f" in {len(files)} file(s)"]
    lines += [f"FATAL {w}" for w in fatal]
    if kinds:
        lines.append("style warnings by kind: " + ", ".join(
            f"{kind} {n}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1])))
    if by_file:
        lines += [f"  {n:5d}  {src}" for src, n in sorted(files.items(),
                                                         key=lambda kv: (-kv[1], kv[0]))]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "_build",
                        help="build folder (HTML in OUT/html; default docs/_build)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="Sphinx processes")
    parser.add_argument("--tmp", action="store_true", help="build into a temporary folder")
    args = parser.parse_args(argv)
    if args.tmp:
        with tempfile.TemporaryDirectory() as tmp:
            status, fatal, style = build(Path(tmp), args.jobs)
    else:
        status, fatal, style = build(args.out, args.jobs)
    print(report(status, fatal, style))
    return 1 if status or fatal else 0


if __name__ == "__main__":
    sys.exit(main())
