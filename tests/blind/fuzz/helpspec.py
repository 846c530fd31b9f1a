"""Parse a command line's argparse ``--help`` texts into command specs (no source read).

Only the printed help is used: the top-level ``COMMAND`` list, nested sub-command lists
(``ACTION``, ``SUBCOMMAND``), each leaf's usage line (required options are those outside
brackets), its option and positional sections (metavar, choices, description) and the
exit codes the description documents.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field

__all__ = ["Opt", "Command", "discover", "parse_help"]


@dataclass
class Opt:
    """One option or positional of a leaf command, as its help prints it."""

    names: list[str]  # ["--out"] or ["--quiet", "--no-progress"]; [] for a positional
    dest: str  # "out", "tick_s", or the positional's name ("scenario", "SRC")
    metavar: str | None  # None for a flag
    choices: list[str] | None
    description: str
    required: bool = False
    positional: bool = False
    multi: bool = False  # nargs +/* ("power [power ...]")
    role: str = "string"  # filled by classify_role
    out_kind: str = "file"  # for role "out": file or dir

    @property
    def flag(self) -> str:
        return self.names[-1] if self.names else self.dest


@dataclass
class Command:
    path: list[str]  # ["flex", "plan"]
    usage: str
    description: str
    options: list[Opt] = field(default_factory=list)
    verdict_codes: set[int] = field(default_factory=set)  # non-zero exits that are verdicts
    output_names: list[str] = field(default_factory=list)  # files the help says it writes

    @property
    def name(self) -> str:
        return " ".join(self.path)

    def opt(self, dest: str) -> Opt | None:
        for o in self.options:
            if o.dest == dest:
                return o
        return None

    @property
    def positionals(self) -> list[Opt]:
        return [o for o in self.options if o.positional]


def _run_help(program: list[str], path: list[str], env=None) -> str:
    res = subprocess.run(
        [*program, *path, "--help"], capture_output=True, text=True, timeout=120, env=env
    )
    return res.stdout


_SECTION = re.compile(r"^(positional arguments|options|optional arguments):\s*$")


def _sections(text: str) -> tuple[str, str, dict[str, list[str]]]:
    """(usage, description, {section: lines})."""
    lines = text.splitlines()
    i = 0
    usage_lines = []
    while i < len(lines) and lines[i].strip():
        usage_lines.append(lines[i])
        i += 1
    usage = " ".join(s.strip() for s in usage_lines)
    desc_lines = []
    sections: dict[str, list[str]] = {}
    cur = None
    for line in lines[i:]:
        m = _SECTION.match(line)
        if m:
            cur = m.group(1)
            sections[cur] = []
            continue
        if cur is None:
            desc_lines.append(line)
        elif line.strip() and not line.startswith(" "):
            cur = None  # another titled group, e.g. "mutually exclusive"
            sections.setdefault("_other", [])
        else:
            sections[cur].append(line)
    return usage, " ".join(s.strip() for s in desc_lines if s.strip()), sections


def _entries(lines: list[str]) -> list[tuple[str, str]]:
    """(head, description) per entry of an argparse section."""
    out: list[list[str]] = []
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= 4:
            body = line.strip()
            parts = re.split(r"\s{2,}", body, maxsplit=1)
            out.append([parts[0], parts[1] if len(parts) > 1 else ""])
        elif out:
            out[-1][1] = (out[-1][1] + " " + line.strip()).strip()
    return [(h, d) for h, d in out]


def _subcommands(sections: dict[str, list[str]]) -> list[str]:
    """Names listed under a COMMAND/ACTION/SUBCOMMAND positional (argparse subparsers)."""
    lines = sections.get("positional arguments", [])
    names = []
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if indent == 4 and line.strip():
            names.append(re.split(r"\s+", line.strip())[0])
    return names


def _required_in_usage(usage: str) -> tuple[set[str], dict[str, str]]:
    """Options written outside brackets, and positional tokens with their nargs shape."""
    depth = 0
    req: set[str] = set()
    tokens = []
    for m in re.finditer(r"\[|\]|\||[^\s\[\]|]+", usage):
        t = m.group(0)
        if t == "[":
            depth += 1
        elif t == "]":
            depth -= 1
        elif t != "|":
            tokens.append((t, depth))
            if t.startswith("--") and depth == 0:
                req.add(t)
    return req, {}


def parse_help(path: list[str], text: str) -> Command:
    usage, desc, sections = _sections(text)
    cmd = Command(path=path, usage=usage, description=desc)
    required, _ = _required_in_usage(usage)
    for head, d in _entries(sections.get("options", []) + sections.get("optional arguments", [])):
        if not head.startswith("-"):
            continue
        # "--out OUT", "--quiet, --no-progress", "--format {csv,xlsx}",
        # "--train-runs POWER[=LOG] [POWER[=LOG] ...]"
        names = re.findall(r"(?:^|,\s*)(-{1,2}[\w-]+)", head)
        rest = head
        for n in names:
            rest = rest.replace(n, "", 1)
        rest = rest.strip(" ,")
        if "--help" in names or "--version" in names:
            continue
        metavar = rest.split(" ")[0] if rest else None
        choices = None
        if metavar and metavar.startswith("{"):
            choices = metavar.strip("{}").split(",")
        long = [n for n in names if n.startswith("--")] or names
        dest = long[0].lstrip("-").replace("-", "_")
        cmd.options.append(
            Opt(
                names=long,
                dest=dest,
                metavar=metavar,
                choices=choices,
                description=d,
                required=any(n in required for n in names),
                multi="..." in rest and "[" in rest,
            )
        )
    # positionals: from the section, shapes from the usage
    tail_usage = usage
    for head, d in _entries(sections.get("positional arguments", [])):
        name = head.split()[0]
        choices = None
        if name.startswith("{"):
            continue
        shape_multi = bool(re.search(r"\[%s \.\.\.\]" % re.escape(name), tail_usage))
        opt_only = bool(
            re.search(r"\[%s \.\.\.\]" % re.escape(name), tail_usage)
        ) and not re.search(
            r"(?<![\[\w])%s \[%s \.\.\.\]" % (re.escape(name), re.escape(name)), tail_usage
        )
        cmd.options.append(
            Opt(
                names=[],
                dest=name,
                metavar=name,
                choices=choices,
                description=d,
                required=not opt_only,
                positional=True,
                multi=shape_multi,
            )
        )
    cmd.verdict_codes = _verdict_codes(desc)
    cmd.output_names = sorted(
        set(re.findall(r"\b([A-Za-z_][\w.-]*\.(?:csv|txt|html|svg|json))\b", desc))
    )
    for o in cmd.options:
        classify_role(o)
    return cmd


def _verdict_codes(desc: str) -> set[int]:
    """Non-zero exit codes the help documents as verdicts rather than bad input.

    "Exit code 0: every requirement passes; 1: one fails ...; 2: bad input" -> {1};
    "exit 0 all met ...; 1: not; 2: bad input" -> {1}.  130 (interrupted) is not a verdict.
    """
    m = re.search(r"[Ee]xit( code)?s?\b(.*)", desc)
    if not m:
        return set()
    codes = set()
    for cm in re.finditer(r"(?<![\d.])(\d{1,3}):\s*([^;.]*)", m.group(2)):
        code, what = int(cm.group(1)), cm.group(2).lower()
        if code in (0, 130) or "bad input" in what or "interrupt" in what:
            continue
        codes.add(code)
    return codes


_NUMERIC_DEST = re.compile(
    r"(^|_)(s|draws?|seed|hours|split|pue|workers|n_gpus|gpus_per_node|interval|rate|hz|w|"
    r"port|timeout|draw|step|tick|window|duration|reporting_rate|meter_interval|limit)$"
)


def classify_role(o: Opt) -> None:
    """Guess what an argument is from its name, metavar and description only."""
    d = o.description.lower()
    dest = o.dest.lower()
    if o.choices:
        o.role = "choice"
        return
    if o.metavar is None:
        o.role = "flag"
        return
    if dest == "out":
        o.role = "out"
        o.out_kind = (
            "dir" if ("folder" in d or "store" in d) and "file to write" not in d else "file"
        )
        return
    if dest in ("tz", "site_tz"):
        o.role = "tz"
        return
    if dest in ("start", "end"):
        o.role = "time"
        return
    if dest == "freq":
        o.role = "freq"
        return
    if dest in ("train_runs", "test_runs"):
        o.role = "runs"
        return
    if dest in ("scheduler",) or "address" in dest:
        o.role = "address"
        return
    if dest in ("gpus",) or dest == "signal_interval_s":
        o.role = "string"
        return
    if dest == "memory_limit":
        o.role = "string"
        return
    # inputs
    if dest in ("scenario",) or d.startswith("scenario yaml"):
        o.role = "in_source" if ("store" in d or "parquet" in d) else "in_scenario"
        return
    if dest == "source":
        o.role = "in_source"
        return
    if "requirement" in dest:
        o.role = "in_requirements"
        return
    if dest in ("target", "event"):
        o.role = "in_target"
        return
    if dest == "sags":
        o.role = "in_sags"
        return
    if dest == "jobs":
        o.role = "in_jobs"
        return
    if dest == "racks":
        o.role = "in_racks"
        return
    if dest == "sacct":
        o.role = "in_sacct"
        return
    if dest == "events":
        o.role = "in_mllog"
        return
    if o.positional and dest in ("store",) and ("meter csv" in d):
        o.role = "in_meter_or_store"
        return
    if o.positional and dest.lower() == "store":
        o.role = "in_store"
        return
    if o.positional and (dest in ("power", "paths", "src") or "telemetry" in d or "files" in d):
        o.role = "in_telemetry"
        return
    if (
        "[s]" in d
        or "[h]" in d
        or "[w]" in d
        or "[hz]" in d
        or "frames/s" in d
        or re.search(r"\(default:? -?[\d.]", d)
        or re.search(r"\d", o.metavar or "") is None
        and o.metavar in ("S", "N", "P")
        or _NUMERIC_DEST.search(dest)
    ):
        o.role = "numeric"
        return
    o.role = "string"


def discover(program: list[str], env=None) -> list[Command]:
    """Every leaf command reachable from ``program --help``."""
    out: list[Command] = []

    def walk(path: list[str]) -> None:
        text = _run_help(program, path, env)
        usage, _desc, sections = _sections(text)
        subs = _subcommands(sections)
        # a subparser group shows as a positional whose usage ends in "COMMAND ..."
        if subs and re.search(r"\b[A-Z]+ \.\.\.\s*$", usage):
            for s in subs:
                walk([*path, s])
        elif path:
            out.append(parse_help(path, text))

    walk([])
    return out
