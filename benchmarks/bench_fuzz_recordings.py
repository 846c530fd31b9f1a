"""Score ``powerlab calibrate`` on mutated recordings (issue 32, item 6): the blind mutation
fuzzer ``tests/blind/recordings/mutate.py`` (written by another helper without reading
the calibration code; used here to SCORE only) writes mutated copies of real recordings;
each copy is read and calibrated.  Counts: tracebacks (any exception other than a
one-line PowerlabError), NaN in a YAML, degradations without a note, and node clock
offsets found against the fuzzer's truth (within one meter interval; for a one-node
recording the skew moves the power log against the training log, scored as the change
of the log offset from the unmutated recording's).

    python benchmarks/bench_fuzz_recordings.py SRC_TREE OUT --n 20 --seed 0

``SRC_TREE`` holds ``power/result_*`` folders with their training logs two levels up.
Skips (exit 0) where the fuzzer is absent.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np
import yaml

from powerlab.calibration.calibrate import calibrate_job
from powerlab.exceptions import PowerlabError
from powerlab.iotools import read_mllog, read_mlperf_power
from powerlab.site.scenario import parse_scenario

#: mutation kind -> words one of the notes must contain
NOTE_FOR = {"clock_skew": ("node clocks", "power log vs training log"),
            "repeated_polls": ("repeated polls",),
            "duplicate_nodes": ("identical node logs",)}


def _values(o):
    if isinstance(o, dict):
        for v in o.values():
            yield from _values(v)
    elif isinstance(o, list):
        for v in o:
            yield from _values(v)
    else:
        yield o


def _log_for(rec: Path):
    logs = sorted(rec.parent.parent.glob(rec.name + ".txt*"))
    return logs[0] if logs else None


def _calibrate(rec: Path):
    log = _log_for(rec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate_job(read_mlperf_power(rec),
                             events=read_mllog(log) if log else None)


def score_one(rec: Path, applied: list, counts: dict, base=None) -> None:
    log = _log_for(rec)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            power = read_mlperf_power(rec)
            cal = calibrate_job(power, events=read_mllog(log) if log else None)
            text = cal.to_yaml()
        parse_scenario(text)
    except PowerlabError as exc:
        counts["refused"] += 1
        print(f"  refused {rec}: {str(exc)[:160]}")
        return
    except Exception:   # noqa: BLE001 - a traceback is what is counted
        counts["tracebacks"] += 1
        print(f"  TRACEBACK {rec}:\n{traceback.format_exc()[-600:]}")
        return
    counts["ok"] += 1
    if any(isinstance(v, float) and not math.isfinite(v)
           for v in _values(yaml.safe_load(text))):
        counts["nan_yaml"] += 1
    notes = " ".join(cal.notes())
    for a in applied:
        want = NOTE_FOR.get(a["kind"])
        if want:
            counts["degradations"] += 1
            counts["noted"] += any(w in notes for w in want)
        if a["kind"] == "clock_skew":
            truth = {k.split(".")[0]: v / 1000 for k, v in a["offsets_ms"].items()}
            found = cal.alignment.node_offsets_s
            common = [h for h in truth if h in found]
            if len(truth) == 1 and base is not None:   # one node: the log offset moves
                (off,) = truth.values()
                d = cal.alignment.log_offset_s - base.alignment.log_offset_s
                if np.isfinite(d):
                    counts["log_offsets"] += 1
                    counts["log_offsets_within"] += int(abs(d - off) <= cal.meter_interval_s)
            if len(common) > 1:
                t = np.array([truth[h] for h in common])
                t -= np.median(t)
                f = np.array([found[h] for h in common])
                err = np.abs((f - np.median(f)) - t)
                counts["offsets"] += len(common)
                counts["offsets_within"] += int((err <= cal.meter_interval_s).sum())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        from tests.blind.recordings.mutate import mutate_tree
    except ImportError:
        print("skipped: tests/blind/recordings/mutate.py is absent")
        return 0
    man = mutate_tree(args.src, args.out, seed=args.seed, n=args.n)
    counts = dict.fromkeys(("ok", "refused", "tracebacks", "nan_yaml", "degradations",
                            "noted", "offsets", "offsets_within", "log_offsets",
                            "log_offsets_within"), 0)
    bases = {}
    for entry in man["recordings"]:
        for r in entry["recordings"]:
            rec = args.out / entry["dir"] / r["recording"]
            kinds = [a["kind"] for a in r["applied"]]
            print(f"{entry['dir']}/{r['recording']}: {', '.join(kinds)}")
            if r["recording"] not in bases:   # the unmutated recording: the log offset's zero
                bases[r["recording"]] = _calibrate(args.src / r["recording"])
            score_one(rec, r["applied"], counts, bases[r["recording"]])
    print("RESULT " + json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
