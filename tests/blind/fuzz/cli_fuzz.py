"""Black-box fuzzer of the ``powerlab`` command line, driven by its ``--help`` texts only.

Written for scoring, without reading powerlab's readers or CLI code (tests/blind/fuzz/README.md).

    python -m tests.blind.fuzz.cli_fuzz --out DIR --cases N --seed S [--timeout-s T] [--jobs J]

Each case runs ``powerlab ...`` in a subprocess in its own scratch folder and is classified:

- ``ok``: exit 0, or a non-zero exit the command's help documents as a verdict
  (``comply`` 1 "a requirement fails", ``size-mitigation`` 1/3, ...); ``rc`` is recorded;
- ``clean_error``: another non-zero exit, no traceback, a short message on stderr;
- ``messy_error``: a non-zero exit without a traceback but with no message at all, a long
  stderr dump, or a bare Python exception line (``KeyError: 'x'``) as the message;
- ``traceback``: ``Traceback (most recent call last)`` on stderr (whatever the exit);
- ``native_crash``: killed by a signal (negative return code, or 128+N for SIGILL, SIGABRT,
  SIGBUS, SIGFPE, SIGKILL, SIGSEGV, SIGXFSZ);
- ``hang``: still running at the timeout (killed; ``duration_s`` and whether it printed
  progress are recorded, so a slow legitimate run can be told apart);
- ``overwritten_input``: an input file's bytes changed or it vanished (every input is
  hashed before and after; takes precedence over every outcome but ``hang``/``native_crash``).

Writes DIR/cases.jsonl (one record per case), DIR/summary.json (counts per outcome and per
command), DIR/repro/<case>/ (the inputs of every failing case, small ones only).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.blind.fuzz import mutate
from tests.blind.fuzz.helpspec import Command, Opt, discover
from tests.blind.fuzz.seeds import REPO, Seed, build_seeds

OUTCOMES = [
    "ok",
    "clean_error",
    "messy_error",
    "traceback",
    "native_crash",
    "hang",
    "overwritten_input",
]
FAILING = {"messy_error", "traceback", "native_crash", "hang", "overwritten_input"}
CRASH_SIGNALS = {4, 6, 7, 8, 9, 11, 25}  # ILL ABRT BUS FPE KILL SEGV XFSZ
PY_EXC_LINE = re.compile(
    r"^(?:[\w.]+\.)?(KeyError|ValueError|TypeError|IndexError|AttributeError|ZeroDivisionError|"
    r"OverflowError|RecursionError|MemoryError|AssertionError|UnicodeDecodeError|UnicodeError|"
    r"NameError|RuntimeError|NotImplementedError|OSError|FileNotFoundError|StopIteration|"
    r"ArrowInvalid|ArrowTypeError|OutOfBoundsDatetime|ParserError|EmptyDataError|"
    r"InvalidOperation|JSONDecodeError|YAMLError|ScannerError|ConstructorError|LinAlgError|"
    r"IntCastingNaNError|OutOfBoundsTimedelta|BinderException|InvalidInputException)\b:?"
)


# ----------------------------------------------------------------------------- cases


@dataclass
class Case:
    id: int
    command: str
    strategy: str
    argv: list[str] = field(default_factory=list)  # after the program
    files: list[dict] = field(default_factory=list)  # {arg, path, seed, mutation}
    hashed: list[str] = field(default_factory=list)  # input paths hashed before/after
    notes: list[str] = field(default_factory=list)
    extra_argv: list[list[str]] = field(default_factory=list)  # options appended as they are


VALID_NUMERIC = {
    "draws": ["1", "2"],
    "seed": ["0", "7"],
    "tick_s": ["1", "0.5"],
    "hours": ["0.2"],
    "split": ["0.5", "0.3"],
    "pue": ["1.2"],
    "base_load_w": ["100000"],
    "n_gpus": ["8", "2"],
    "gpus_per_node": ["8"],
    "timeout_s": ["5"],
    "step_s": ["1", "2"],
    "draw": ["0", "1"],
    "short_tick_s": ["0.1", "0.05"],
    "short_window_s": ["30"],
    "ride_through_draws": ["0", "1"],
    "reporting_rate": ["60", "30"],
    "hold_s": ["600", "1800"],
    "response_s": ["30"],
    "averaging_s": ["60"],
    "interval_s": ["0.1"],
    "duration_s": ["1"],
    "meter_interval": ["1", "2"],
    "flush_interval_s": ["1"],
    "max_buffer_s": ["60"],
    "hang_timeout_s": ["1"],
    "prometheus_port": ["0"],
    "workers": ["1"],
}
VALID_STRING = {
    "name": ["fuzzjob"],
    "host": ["h1"],
    "levers": ["power_cap,pause", "shift_start"],
    "method": ["pre_event_mean", "high_4_of_5"],
    "memory_limit": ["1GiB"],
    "gpus": ["0"],
    "signal_interval_s": ["temperature=1"],
}
VALID_TIME = {"start": ["2025-06-02T12:05:00Z"], "end": ["2025-06-02T12:25:00Z"]}
SPEED = {
    "draws": "1",
    "hours": "0.2",
    "short_window_s": "30",
    "ride_through_draws": "1",
    "duration_s": "1",
    "hold_s": "600",
}

ROLE_SEEDS = {
    "in_scenario": ["in_scenario"],
    "in_source": ["in_source"],
    "in_requirements": ["in_requirements"],
    "in_target": ["in_target"],
    "in_sags": ["in_sags"],
    "in_jobs": ["in_jobs"],
    "in_racks": ["in_racks"],
    "in_sacct": ["in_sacct"],
    "in_mllog": ["in_mllog"],
    "in_store": ["in_store"],
    "in_telemetry": ["in_telemetry"],
    "in_meter_or_store": ["in_meter"],
}


class Generator:
    def __init__(self, commands: list[Command], seeds: list[Seed], seeds_dir: Path):
        self.commands = commands
        self.seeds = seeds
        self.seeds_dir = seeds_dir

    # -- seeds
    def _pick_seed(self, rng, cmd: Command, o: Opt) -> Seed | None:
        roles = list(ROLE_SEEDS.get(o.role, []))
        if cmd.name == "flex verify" and o.dest == "event":
            roles = ["in_event_meter"] if rng.random() < 0.7 else ["in_target"]
        if cmd.name == "import" and o.positional:
            roles = ["in_telemetry", "in_import_only"]
        if o.role == "in_scenario" and rng.random() < 0.03:
            roles = ["in_scenario_slow"]
        cands = [s for s in self.seeds if s.roles & set(roles)]
        if cmd.name == "import":
            cands = [
                s for s in cands if "in_store" not in s.roles and not s.name.endswith(".parquet")
            ]
        if not cands:
            return None
        return rng.choices(cands, weights=[s.weight for s in cands])[0]

    def _copy_seed(self, seed: Seed, case_dir: Path) -> str:
        top = seed.name.split("/")[0]
        src, dst = self.seeds_dir / top, case_dir / top
        if not dst.exists():
            if src.is_dir():
                shutil.copytree(src, dst)
            else:
                shutil.copy2(src, dst)
        return seed.name

    # -- the case
    def generate(
        self, cid: int, rng: random.Random, case_dir: Path, only: list[str] | None
    ) -> Case:
        cmds = [c for c in self.commands if not only or c.name in only or c.path[0] in only]
        weights = [0.15 if c.name == "demo" else 0.4 if c.name == "collect" else 1.0 for c in cmds]
        cmd = rng.choices(cmds, weights=weights)[0]
        strategy = rng.choices(
            ["numeric", "values", "file", "alias", "argv", "combo"],
            weights=[24, 10, 38, 12, 10, 6],
        )[0]
        if strategy == "alias" and not cmd.opt("out"):
            strategy = "file"
        case = Case(id=cid, command=cmd.name, strategy=strategy)
        args: dict[str, list[str] | None] = {}  # dest -> values (None: flag present)
        order: list[Opt] = []
        extra_opts: dict[str, str] = {}
        inputs: dict[str, list[str]] = {}  # dest -> input paths

        def set_valid(o: Opt):
            if o.role == "flag":
                args[o.dest] = None
            elif o.role == "choice":
                ch = [c for c in o.choices if not (c == "dask")] or o.choices
                args[o.dest] = [rng.choice(ch)]
            elif o.role == "numeric":
                args[o.dest] = [rng.choice(VALID_NUMERIC.get(o.dest, ["1"]))]
            elif o.role == "time":
                args[o.dest] = [rng.choice(VALID_TIME.get(o.dest, ["2025-06-02T12:10:00Z"]))]
            elif o.role == "tz":
                args[o.dest] = [rng.choice(["UTC", "America/New_York"])]
            elif o.role == "freq":
                args[o.dest] = [rng.choice(["1min", "15s", "5min"])]
            elif o.role == "out":
                args[o.dest] = [self._out_name(cmd, o, rng, args)]
            elif o.role == "runs":
                self._copy_seed(Seed("b200/power/result_0", set()), case_dir)
                args[o.dest] = [
                    "b200/power/result_0" if o.dest == "train_runs" else "b200/power/result_1"
                ]
                inputs[o.dest] = ["b200"]
            elif o.role.startswith("in_"):
                n = 1
                if o.multi and rng.random() < 0.2:
                    n = 2
                vals = []
                for _ in range(n):
                    s = self._pick_seed(rng, cmd, o)
                    if s is None:
                        continue
                    vals.append(self._copy_seed(s, case_dir))
                    for k, v in s.extra.items():
                        extra_opts.setdefault(k, v)
                args[o.dest] = vals
                inputs[o.dest] = list(vals)
            elif o.role == "address":
                return
            else:
                args[o.dest] = [rng.choice(VALID_STRING.get(o.dest, ["x"]))]

        run_to_run = cmd.opt("train_runs") is not None and rng.random() < 0.3
        for o in sorted(cmd.options, key=lambda o: not o.positional):  # inputs first
            if o.role == "runs" or (run_to_run and o.positional):
                if run_to_run and o.role == "runs":
                    set_valid(o)
                continue
            if o.required or o.positional and o.role.startswith("in_") and rng.random() < 0.8:
                set_valid(o)
            elif o.role == "flag" and o.dest in ("quiet", "no_progress", "force"):
                if rng.random() < 0.7:
                    set_valid(o)
            elif o.dest in SPEED:
                args[o.dest] = [SPEED[o.dest]]
            elif o.dest in ("by",):
                if rng.random() < 0.4:
                    set_valid(o)
            elif o.description.lower().startswith("telemetry only") and any(
                str(v).endswith(".yaml") for v in args.get("source") or []
            ):
                pass
            elif (
                rng.random() < 0.18
                and o.role not in ("address",)
                and o.dest not in ("workers", "engine")
            ):
                set_valid(o)
            order.append(o)
        # companion options of the chosen seeds (e.g. --tz for zone-less logs)
        for flag, v in extra_opts.items():
            o = next((x for x in cmd.options if flag in x.names), None)
            if o and o.dest not in args:
                args[o.dest] = [v]
        # --by job needs a map; --by rack needs racks
        if args.get("by") == ["job"] and "jobs" not in args and "sacct" not in args:
            o = cmd.opt("jobs")
            if o:
                set_valid(o)
        if args.get("by") == ["rack"] and "racks" not in args:
            o = cmd.opt("racks")
            if o:
                set_valid(o)
        if (
            cmd.opt("scenario")
            and not cmd.opt("scenario").positional
            and args.get("method") == ["forecast_counterfactual"]
        ):
            set_valid(cmd.opt("scenario"))

        # -- the strategy
        strategies = [strategy] if strategy != "combo" else ["numeric", "file"]
        for st in strategies:
            getattr(self, "_st_" + st)(cmd, rng, case_dir, case, args, inputs, set_valid)

        # -- argv in the help's order
        argv = list(cmd.path)
        for o in cmd.options:
            if o.positional or o.dest not in args:
                continue
            v = args[o.dest]
            if v is None:
                argv.append(o.flag)
            elif o.multi:
                argv.append(o.flag)
                argv += v
            else:
                for x in v:
                    # "--opt=-inf": a value starting with '-' would read as an option
                    if x.startswith("-") or (x and rng.random() < 0.2):
                        argv.append(f"{o.flag}={x}")
                    else:
                        argv += [o.flag, x]
        for extra in case.extra_argv:
            argv += extra
        pos = []
        for o in cmd.positionals:
            if o.dest in args and args[o.dest] is not None:
                pos += args[o.dest]
        if pos:
            if any(p.startswith("-") for p in pos):
                argv.append("--")
            argv += pos
        case.argv = argv
        # hash every input path that exists inside the case folder
        inplace = cmd.name == "store upgrade"
        hashed = set()
        for dest, paths in inputs.items():
            if inplace and dest == "STORE":
                continue
            for p in paths:
                if p and (case_dir / p).exists() and _inside(case_dir, case_dir / p):
                    hashed.add(p)
        for f in case.files:
            if f.get("path") and (case_dir / f["path"]).exists() and not inplace:
                hashed.add(f["path"])
        case.hashed = sorted(hashed)
        return case

    def _out_name(self, cmd: Command, o: Opt, rng, args) -> str:
        if o.out_kind == "dir":
            return "outstore" if cmd.name in ("import", "collect") else "out"
        d = o.description.lower()
        if "yaml" in d:
            return "out.yaml"
        if ".parquet" in d and rng.random() < 0.5:
            return "out.parquet"
        if args.get("format") == ["xlsx"]:
            return "out.xlsx"
        return "out.csv"

    # -- strategies
    def _st_numeric(self, cmd, rng, case_dir, case, args, inputs, set_valid):
        nums = [o for o in cmd.options if o.role == "numeric"]
        if not nums:
            return self._st_values(cmd, rng, case_dir, case, args, inputs, set_valid)
        for o in rng.sample(nums, min(len(nums), rng.choice([1, 1, 1, 2]))):
            v = mutate.hostile_value("numeric", rng)
            args[o.dest] = [v]
            case.notes.append(f"{o.flag}={v[:40]!r}")

    def _st_values(self, cmd, rng, case_dir, case, args, inputs, set_valid):
        opts = [
            o
            for o in cmd.options
            if o.role in ("time", "tz", "freq", "string", "choice", "address") and not o.positional
        ]
        if not opts:
            return self._st_argv(cmd, rng, case_dir, case, args, inputs, set_valid)
        o = rng.choice(opts)
        v = mutate.hostile_value(o.role, rng, o.choices)
        args[o.dest] = [v]
        case.notes.append(f"{o.flag}={v[:40]!r}")

    def _input_dests(self, args, inputs):
        return [d for d in inputs if args.get(d)]

    def _st_file(self, cmd, rng, case_dir, case, args, inputs, set_valid):
        dests = self._input_dests(args, inputs)
        if not dests:
            return self._st_numeric(cmd, rng, case_dir, case, args, inputs, set_valid)
        dest = rng.choice(dests)
        path = rng.choice(args[dest])
        if dest in ("train_runs", "test_runs"):
            path = args[dest][0]
        target = case_dir / path
        # mutate a private copy so that two arguments naming one seed stay apart
        if target.is_dir() and (target / "..").resolve() == case_dir.resolve():
            pass
        if target.is_symlink() or not target.exists() or not _inside(case_dir, target):
            case.notes.append(f"{dest}: nothing to mutate at {path!r}")
            return
        label = mutate.mutate_path(target, rng)
        case.files.append({"arg": dest, "path": path, "mutation": label})
        case.notes.append(f"{dest}: {label}")

    def _st_alias(self, cmd, rng, case_dir, case, args, inputs, set_valid):
        out = cmd.opt("out")
        dests = self._input_dests(args, inputs)
        if not dests:
            return self._st_argv(cmd, rng, case_dir, case, args, inputs, set_valid)
        force = cmd.opt("force")
        if force:
            args["force"] = None
        dest = rng.choice(dests)
        path = rng.choice(args[dest])
        p = case_dir / path
        op = rng.choice(
            [
                "out_is_input",
                "hardlink",
                "symlink",
                "dir_holds_input",
                "inside_input_dir",
                "sidecar_clash",
                "parent_of_input",
            ]
        )
        if op in ("hardlink", "symlink") and not p.is_file():
            files = [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else []
            if not files:
                op = "out_is_input"
            else:
                p = rng.choice(files)
                path = str(p.relative_to(case_dir))
        if op == "out_is_input":
            want = Path(args["out"][0]).suffix
            if (
                out.out_kind == "file"
                and p.is_file()
                and want
                and p.suffix != want
                and rng.random() < 0.6
            ):
                # give the input the output's extension, so that only the aliasing can refuse it
                new = "in_" + p.stem + want
                shutil.move(str(p), case_dir / new)
                args[dest] = [new if x == path else x for x in args[dest]]
                inputs[dest] = [new if x == path else x for x in inputs[dest]]
                path = new
            args["out"] = [path]
        elif op in ("hardlink", "symlink"):
            suffix = Path(args["out"][0]).suffix or p.suffix
            link = case_dir / ("link" + suffix)
            if out.out_kind == "dir":
                (case_dir / "out").mkdir(exist_ok=True)
                names = cmd.output_names or ["summary.txt"]
                link = case_dir / "out" / rng.choice(names)
                args["out"] = ["out"]
            else:
                args["out"] = [link.name]
            if op == "hardlink":
                os.link(p, link)
            else:
                link.symlink_to(p.resolve())
            inputs.setdefault("_alias", []).append(path)
        elif op == "dir_holds_input" and out.out_kind == "dir" and cmd.output_names and p.is_file():
            (case_dir / "out").mkdir(exist_ok=True)
            new = "out/" + rng.choice(cmd.output_names)
            shutil.move(str(p), case_dir / new)
            args[dest] = [new if x == path else x for x in args[dest]]
            inputs[dest] = [new if x == path else x for x in inputs[dest]]
            args["out"] = ["out"]
            path = new
        elif op == "sidecar_clash" and out.out_kind == "file" and p.is_file():
            new = "site.json"
            shutil.move(str(p), case_dir / new)
            args[dest] = [new if x == path else x for x in args[dest]]
            inputs[dest] = [new if x == path else x for x in inputs[dest]]
            args["out"] = ["site" + (Path(args["out"][0]).suffix or ".csv")]
            path = new
        elif op == "parent_of_input" and "/" in path:
            args["out"] = [
                str(Path(path).parent)
                if out.out_kind == "dir"
                else str(Path(path).parent / "out.csv")
            ]
        elif op == "inside_input_dir" and p.is_dir():
            args["out"] = [path if out.out_kind == "dir" else path + "/out.csv"]
        else:
            args["out"] = [path]
            op = "out_is_input"
        case.files.append({"arg": dest, "path": path, "mutation": "alias:" + op})
        case.notes.append(f"alias {op}: --out {args['out'][0]} vs {dest}={path}")

    def _st_argv(self, cmd, rng, case_dir, case, args, inputs, set_valid):
        op = rng.choice(
            [
                "drop_required",
                "dup_option",
                "nonexistent",
                "dir_for_file",
                "file_for_dir",
                "devnull",
                "weird_name",
                "long_path",
                "unknown_option",
                "empty_path",
                "out_deep",
                "empty_file",
                "unreadable",
            ]
        )
        dests = self._input_dests(args, inputs)
        if op == "drop_required":
            req = [o for o in cmd.options if o.required and o.dest in args]
            if req:
                o = rng.choice(req)
                del args[o.dest]
                case.notes.append(f"dropped {o.flag}")
                return
            op = "unknown_option"
        if op == "dup_option":
            cands = [o for o in cmd.options if not o.positional and o.dest in args and args[o.dest]]
            if cands:
                o = rng.choice(cands)
                v = (
                    mutate.hostile_value(o.role, rng, o.choices)
                    if o.role in ("numeric", "time", "tz")
                    else args[o.dest][0]
                )
                case.extra_argv = [[o.flag, v]]
                case.notes.append(f"duplicated {o.flag} {v[:30]!r}")
                return
            op = "unknown_option"
        if op == "unknown_option":
            case.extra_argv = [[rng.choice(["--bogus", "--out=", "-", "--", "--draws=1=2", "-x"])]]
            case.notes.append(f"unknown option {case.extra_argv}")
            return
        if op == "out_deep" and "out" in args:
            args["out"] = ["a/" * 40 + (Path(args["out"][0]).name)]
            case.notes.append("out in a missing deep folder")
            return
        if not dests:
            return self._st_numeric(cmd, rng, case_dir, case, args, inputs, set_valid)
        dest = rng.choice(dests)
        old = args[dest][0]
        if op == "nonexistent":
            new = "missing/nothing_here.yaml"
        elif op == "dir_for_file":
            (case_dir / "emptydir").mkdir(exist_ok=True)
            new = "emptydir"
        elif op == "file_for_dir":
            (case_dir / "afile.txt").write_text("hello\n")
            new = "afile.txt"
        elif op == "devnull":
            new = "/dev/null"
        elif op == "weird_name":
            src = case_dir / old
            name = rng.choice(
                [
                    "-dash.yaml",
                    "new\nline.yaml",
                    "sp ace;$(touch x).csv",
                    "\u00fcn\u00efc\u00f6de.yaml",
                    "\udcff.bin",
                ]
            )
            try:
                os.rename(src, case_dir / name)
                new = name
                inputs[dest] = [name if x == old else x for x in inputs[dest]]
            except (OSError, UnicodeEncodeError):
                new = old
        elif op == "long_path":
            d = case_dir
            for _ in range(18):
                d = d / ("L" * 250)
            try:
                d.mkdir(parents=True)
                new = str(d.relative_to(case_dir) / "x.yaml")
            except OSError:
                new = "L" * 300 + ".yaml"
        elif op == "empty_path":
            new = ""
        elif op == "empty_file":
            p = case_dir / old
            if p.is_file():
                p.write_bytes(b"")
            new = old
        else:  # unreadable: root reads anything; use a dangling symlink instead
            (case_dir / "dangling.yaml").symlink_to(case_dir / "no_such_target")
            new = "dangling.yaml"
        args[dest] = [new] + args[dest][1:]
        case.notes.append(f"{op}: {dest}={new[:60]!r}")


def _inside(root: Path, p: Path) -> bool:
    try:
        p.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


# --------------------------------------------------------------------- run + classify


def hash_tree(root: Path, rel: str) -> dict[str, str]:
    p = root / rel
    out = {}
    if p.is_file():
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    elif p.is_dir():
        for f in sorted(p.rglob("*")):
            if f.is_file() and not f.is_symlink() and "locks" not in f.parts:
                out[str(f.relative_to(root))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def _limits(mem_bytes: int, fsize: int):
    def fn():
        os.nice(10)
        resource.setrlimit(resource.RLIMIT_DATA, (mem_bytes, mem_bytes))  # not AS: V8 reserves
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return fn


def run_argv(
    program: list[str],
    argv: list[str],
    cwd: Path,
    timeout: float,
    env: dict,
    mem_bytes: int = 8 << 30,
    fsize: int = 512 << 20,
) -> dict:
    """Run one command; return rc, timed_out, duration, stdout/stderr tails."""
    out_f, err_f = cwd / ".stdout", cwd / ".stderr"
    t0 = time.monotonic()
    timed_out = False
    cpu_s = None
    with open(out_f, "wb") as fo, open(err_f, "wb") as fe:
        proc = subprocess.Popen(
            [*program, *argv],
            cwd=cwd,
            stdout=fo,
            stderr=fe,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            preexec_fn=_limits(mem_bytes, fsize),
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            cpu_s = _cpu_seconds(proc.pid)  # busy (slow) or blocked (waiting forever)?
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            rc = proc.wait()
    dur = time.monotonic() - t0
    # clean up anything the command left in its process group
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    stderr = _tail(err_f, 64_000)
    stdout = _tail(out_f, 4_000)
    err_f.unlink(missing_ok=True)
    out_f.unlink(missing_ok=True)
    return {
        "rc": rc,
        "timed_out": timed_out,
        "duration_s": round(dur, 3),
        "cpu_s_at_timeout": cpu_s,
        "stderr": stderr,
        "stdout": stdout,
    }


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a running process (Linux /proc), None if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, IndexError, ValueError):
        return None


def _tail(p: Path, n: int) -> str:
    with open(p, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - n))
        return fh.read().decode("utf-8", "replace")


def classify(
    rc: int, timed_out: bool, stderr: str, changed: list[str], verdict_codes=frozenset()
) -> str:
    """The outcome of one run (see the module docstring)."""
    if timed_out:
        return "hang"
    if rc < 0 or (rc - 128) in CRASH_SIGNALS:
        return "native_crash"
    if changed:
        return "overwritten_input"
    if "Traceback (most recent call last)" in stderr:
        return "traceback"
    if rc == 0 or rc in verdict_codes:
        return "ok"
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if not lines:
        return "messy_error"
    last = lines[-1].strip()
    # "powerlab X: error: ..." or argparse's "usage: ... error: ..."; a bare exception repr is not clean
    body = re.sub(r"^powerlab[\w -]*: (error|warning): ", "", last)
    if PY_EXC_LINE.match(body) or PY_EXC_LINE.match(last):
        return "messy_error"
    if len(lines) > 40 and not any("error" in ln.lower() for ln in lines[-3:]):
        return "messy_error"
    return "clean_error"


def execute(
    case: Case,
    program: list[str],
    case_dir: Path,
    timeout: float,
    env: dict,
    verdict_codes=frozenset(),
) -> dict:
    before = {}
    for rel in case.hashed:
        before.update(hash_tree(case_dir, rel))
    res = run_argv(program, case.argv, case_dir, timeout, env)
    after = {}
    for rel in case.hashed:
        after.update(hash_tree(case_dir, rel))
    changed = sorted(k for k, h in before.items() if after.get(k) != h)
    added = sorted(set(after) - set(before))
    outcome = classify(res["rc"], res["timed_out"], res["stderr"], changed, verdict_codes)
    err_lines = [ln for ln in res["stderr"].splitlines() if ln.strip()]
    flags = []
    if "Traceback (most recent call last)" in res["stderr"] and outcome != "traceback":
        flags.append("traceback")
    if re.search(r"\b\w*Warning: ", res["stderr"]) and "DataQualityWarning" not in res["stderr"]:
        flags.append("python_warning")
    if added:
        flags.append("files_added_to_input")
    exc = None
    m = re.findall(r"^(\w[\w.]*(?:Error|Exception|Interrupt|Exit)\b.*)$", res["stderr"], re.M)
    if m and outcome == "traceback":
        exc = m[-1][:300]
    return {
        "id": case.id,
        "command": case.command,
        "strategy": case.strategy,
        "argv": ["powerlab", *case.argv],
        "files": case.files,
        "notes": case.notes,
        "outcome": outcome,
        "rc": res["rc"],
        "duration_s": res["duration_s"],
        "cpu_s_at_timeout": res["cpu_s_at_timeout"],
        "progress_seen": bool(
            re.search(r"(estimate|time left|progress|done|/s\b)", res["stderr"], re.I)
        ),
        "hashed": case.hashed,
        "changed_inputs": changed,
        "added_to_inputs": added[:20],
        "exception": exc,
        "flags": flags,
        "stderr_tail": "\n".join(err_lines[-12:])[-3000:],
        "stderr_last": err_lines[-1][:500] if err_lines else "",
    }


# -------------------------------------------------------------------------- driver


def default_program() -> list[str]:
    exe = shutil.which("powerlab")
    return [exe] if exe else [sys.executable, "-m", "powerlab"]


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        env[k] = "1"
    env["MPLBACKEND"] = "Agg"
    env["PYTHONFAULTHANDLER"] = "0"
    env["NO_COLOR"] = "1"
    return env


def summarize(records: list[dict], meta: dict) -> dict:
    per_outcome = collections.Counter(r["outcome"] for r in records)
    per_cmd: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    per_strategy: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in records:
        per_cmd[r["command"]][r["outcome"]] += 1
        per_strategy[r["strategy"]][r["outcome"]] += 1
    exc = collections.Counter(
        (r["command"], (r["exception"] or r["stderr_last"])[:160])
        for r in records
        if r["outcome"] in FAILING
    )
    return {
        **meta,
        "cases": len(records),
        "per_outcome": {o: per_outcome.get(o, 0) for o in OUTCOMES},
        "per_command": {
            c: dict(v) | {"total": sum(v.values())} for c, v in sorted(per_cmd.items())
        },
        "per_strategy": {c: dict(v) for c, v in sorted(per_strategy.items())},
        "distinct_failures": [
            {"command": c, "message": m, "count": n} for (c, m), n in exc.most_common(60)
        ],
        "slowest_ok": sorted(
            (
                {"id": r["id"], "command": r["command"], "duration_s": r["duration_s"]}
                for r in records
                if r["outcome"] in ("ok", "clean_error")
            ),
            key=lambda x: -x["duration_s"],
        )[:10],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.blind.fuzz.cli_fuzz", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--out", required=True, type=Path, help="campaign folder")
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--timeout-s", type=float, default=60.0, help="per case (a run still going is a hang)"
    )
    ap.add_argument("--jobs", type=int, default=1, help="cases run at once")
    ap.add_argument("--commands", default="", help="comma-separated commands to fuzz (default all)")
    ap.add_argument(
        "--program", default="", help="command to fuzz instead of powerlab (shell words)"
    )
    ap.add_argument("--max-minutes", type=float, default=0, help="stop starting cases after this")
    ap.add_argument("--keep-scratch", action="store_true")
    ap.add_argument(
        "--regen-repro",
        action="store_true",
        help="rewrite DIR/repro/ of the campaign in --out (same --seed): each failing case's "
        "inputs regenerated as they were before the run",
    )
    ap.add_argument(
        "--replay",
        type=Path,
        help="rerun the failing cases kept in this earlier campaign folder (its repro/) instead "
        "of generating new ones: the same inputs and command lines against the current code",
    )
    a = ap.parse_args(argv)

    import shlex

    program = shlex.split(a.program) if a.program else default_program()
    env = child_env()
    a.out.mkdir(parents=True, exist_ok=True)
    log_f = open(a.out / "log.txt", "a")

    def log(msg):
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, file=sys.stderr, flush=True)
        log_f.write(line + "\n")
        log_f.flush()

    if a.replay:
        return replay(a, program, env, log)
    commands = discover(program, env)
    log(f"discovered {len(commands)} commands: {', '.join(c.name for c in commands)}")
    (a.out / "commands.json").write_text(
        json.dumps([asdict(c) for c in commands], indent=1, default=str)
    )
    seeds_dir = a.out / "seeds"
    if a.regen_repro:  # the campaign's own seeds, the catalogue rebuilt aside
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            seeds = build_seeds(Path(tmp) / "seeds", program, env, log=log)
        gen = Generator(commands, seeds, seeds_dir)
        only = [x.strip() for x in a.commands.split(",") if x.strip()] or None
        n = 0
        for line in (a.out / "cases.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["outcome"] in FAILING:
                ok = _regen_repro(
                    gen, a.seed, rec["id"], only, a.out / "repro" / f"case{rec['id']:05d}", rec
                )
                n += 1
                if not ok:
                    log(f"case {rec['id']}: regenerated command line differs from the record")
        log(f"regenerated {n} repro folders")
        return 0
    seeds = build_seeds(seeds_dir, program, env, log=log)
    gen = Generator(commands, seeds, seeds_dir)
    vcodes = {c.name: frozenset(c.verdict_codes) for c in commands}
    only = [x.strip() for x in a.commands.split(",") if x.strip()] or None

    scratch = a.out / "scratch"
    scratch.mkdir(exist_ok=True)
    (a.out / "repro").mkdir(exist_ok=True)
    records: list[dict] = []
    lock = threading.Lock()
    jsonl = open(a.out / "cases.jsonl", "w")
    t_start = time.monotonic()
    meta = {
        "seed": a.seed,
        "timeout_s": a.timeout_s,
        "jobs": a.jobs,
        "program": program,
        "repo": str(REPO),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }

    def one(i: int):
        if a.max_minutes and time.monotonic() - t_start > 60 * a.max_minutes:
            return
        rng = random.Random(f"{a.seed}:{i}")
        case_dir = scratch / f"case{i:05d}"
        if case_dir.exists():
            shutil.rmtree(case_dir, ignore_errors=True)
        case_dir.mkdir(parents=True)
        try:
            case = gen.generate(i, rng, case_dir, only)
        except Exception as exc:  # a generator bug must not stop the campaign
            log(f"case {i}: generator failed: {exc!r}")
            shutil.rmtree(case_dir, ignore_errors=True)
            return
        case.argv = [x.replace("\x00", "") for x in case.argv]  # exec cannot pass a NUL
        try:
            rec = execute(
                case, program, case_dir, a.timeout_s, env, vcodes.get(case.command, frozenset())
            )
        except Exception as exc:  # a harness bug must not stop the campaign
            log(f"case {i}: harness failed: {exc!r}")
            shutil.rmtree(case_dir, ignore_errors=True)
            return
        if rec["outcome"] in FAILING:
            _regen_repro(gen, a.seed, i, only, a.out / "repro" / f"case{i:05d}", rec)
        if not a.keep_scratch:
            shutil.rmtree(case_dir, ignore_errors=True)
        with lock:
            records.append(rec)
            jsonl.write(json.dumps(rec) + "\n")
            jsonl.flush()
            n = len(records)
            if n % 25 == 0:
                c = collections.Counter(r["outcome"] for r in records)
                log(f"{n}/{a.cases} cases, {time.monotonic() - t_start:.0f} s: {dict(c)}")
                (a.out / "summary.json").write_text(json.dumps(summarize(records, meta), indent=1))

    def one_safe(i: int):
        try:
            one(i)
        except Exception as exc:  # never let one case end the campaign
            log(f"case {i}: harness failed: {exc!r}")

    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        list(ex.map(one_safe, range(a.cases)))
    jsonl.close()
    meta["elapsed_s"] = round(time.monotonic() - t_start, 1)
    summ = summarize(sorted(records, key=lambda r: r["id"]), meta)
    (a.out / "summary.json").write_text(json.dumps(summ, indent=1))
    log(f"done: {summ['cases']} cases: {summ['per_outcome']}")
    if not a.keep_scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def replay(a, program: list[str], env: dict, log) -> int:
    """Rerun every case kept under ``a.replay/repro/`` and classify it again."""
    import copy

    scratch = a.out / "scratch"
    scratch.mkdir(exist_ok=True)
    recs = []
    with open(a.out / "cases.jsonl", "w") as jsonl:
        for rdir in sorted((a.replay / "repro").glob("case*")):
            old = json.loads((rdir / "case.json").read_text())
            case_dir = scratch / rdir.name
            shutil.rmtree(case_dir, ignore_errors=True)
            shutil.copytree(rdir, case_dir, symlinks=True)
            (case_dir / "case.json").unlink()
            (case_dir / "rerun.sh").unlink()
            if (case_dir / "links.json").exists():
                for first, *others in json.loads((case_dir / "links.json").read_text()):
                    for o in others:
                        (case_dir / o).unlink()
                        os.link(case_dir / first, case_dir / o)
                (case_dir / "links.json").unlink()
            hashed = old.get("hashed") or sorted(
                {f["path"] for f in old.get("files", []) if f.get("path")}
                | set(old.get("changed_inputs", []))
            )
            hashed = [
                h for h in hashed if (case_dir / h).exists() or h in old.get("changed_inputs", [])
            ]
            case = Case(
                id=old["id"],
                command=old["command"],
                strategy=old["strategy"],
                argv=old["argv"][1:],
                files=old.get("files", []),
                hashed=hashed,
                notes=old.get("notes", []),
            )
            vcodes = frozenset(copy.copy(old.get("verdict_codes", [])))
            if not vcodes:  # the verdict codes of the current help
                vcodes = _verdicts_now(program, env).get(case.command, frozenset())
            rec = execute(case, program, case_dir, a.timeout_s, env, vcodes)
            rec["previous_outcome"] = old["outcome"]
            recs.append(rec)
            jsonl.write(json.dumps(rec) + "\n")
            jsonl.flush()
            log(f"replay {rdir.name}: {old['outcome']} -> {rec['outcome']}")
            if not a.keep_scratch:
                shutil.rmtree(case_dir, ignore_errors=True)
    meta = {
        "replay_of": str(a.replay),
        "timeout_s": a.timeout_s,
        "program": program,
        "repo": str(REPO),
    }
    summ = summarize(recs, meta)
    summ["transitions"] = dict(
        collections.Counter(f"{r['previous_outcome']} -> {r['outcome']}" for r in recs)
    )
    (a.out / "summary.json").write_text(json.dumps(summ, indent=1))
    log(f"replayed {len(recs)} cases: {summ['per_outcome']}; {summ['transitions']}")
    if not a.keep_scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


_VERDICTS: dict = {}


def _verdicts_now(program, env) -> dict:
    if not _VERDICTS:
        _VERDICTS.update({c.name: frozenset(c.verdict_codes) for c in discover(program, env)})
    return _VERDICTS


def _regen_repro(gen, seed, i, only, dst: Path, rec: dict) -> bool:
    """Regenerate case ``i`` (deterministic) into ``dst``: its inputs as they were before the run."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    case = gen.generate(i, random.Random(f"{seed}:{i}"), dst, only)
    (dst / "case.json").write_text(json.dumps(rec, indent=1))
    # hard links do not survive a copy: name them, replay makes them again
    by_inode = collections.defaultdict(list)
    for p in sorted(dst.rglob("*")):
        if p.is_file() and not p.is_symlink() and p.stat().st_nlink > 1:
            by_inode[p.stat().st_ino].append(str(p.relative_to(dst)))
    groups = [g for g in by_inode.values() if len(g) > 1]
    if groups:
        (dst / "links.json").write_text(json.dumps(groups))
    (dst / "rerun.sh").write_bytes(
        (
            '#!/bin/sh\n# run from this folder (the case\'s scratch layout)\ncd "$(dirname "$0")"\n'
            + " ".join(_shq(x) for x in rec["argv"])
            + "\n"
        ).encode("utf-8", "surrogateescape")
    )
    return ["powerlab", *case.argv] == rec["argv"]


def _keep_repro(case: Case, case_dir: Path, dst: Path, rec: dict, limit: int = 8 << 20) -> None:
    """Copy a failing case's inputs (when small) and its record, to rerun it by hand."""
    dst.mkdir(parents=True, exist_ok=True)
    total = 0
    for p in sorted(case_dir.rglob("*")):
        if p.is_symlink() or not p.is_file() or p.name in (".stdout", ".stderr"):
            continue
        rel = p.relative_to(case_dir)
        if len(str(rel)) > 400 or rel.parts[0] in ("out", "outstore"):
            continue
        size = p.stat().st_size
        if total + size > limit:
            continue
        total += size
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dst / rel)
    (dst / "case.json").write_text(json.dumps(rec, indent=1))
    (dst / "rerun.sh").write_bytes(
        (
            '#!/bin/sh\n# run from this folder (the case\'s scratch layout)\ncd "$(dirname "$0")"\n'
            + " ".join(_shq(x) for x in rec["argv"])
            + "\n"
        ).encode("utf-8", "surrogateescape")
    )


def _shq(s: str) -> str:
    import shlex

    return shlex.quote(s) if len(s) < 2000 else shlex.quote(s[:50]) + "...(truncated)"


if __name__ == "__main__":
    raise SystemExit(main())
