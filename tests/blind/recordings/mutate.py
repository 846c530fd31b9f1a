"""Mutation fuzzer for MLPerf power recordings (blind; scoring only).

Written from the file format of the real recordings under /work/shared/data/
(and its README), not from any parser:

* A *recording* is a power result folder ``.../power/result_<id>/`` holding one
  file per node, ``node_<N>.txt`` (SMC, MLPerf Training v4.0: CRLF lines, about
  one reading every 2 s) or ``node_<N>.txt.gz`` (Lenovo, v5.0: gzip, LF lines,
  1 s), and possibly ``sw_<k>.txt`` (switch estimates, left alone).
  Each line is ``:::MLLOG {json}`` with ``time_ms`` (Unix epoch ms, the node's own
  clock), ``event_type``, ``key`` (``power_measurement_start`` /
  ``power_reading`` / ``power_measurement_stop``, ``conversion_eff``), ``value``
  (watts for ``power_reading``; int in SMC files, float in Lenovo files).
* The training log ``result_<id>.txt[.gz]`` sits two levels up; it is copied
  unchanged (its ``time_ms`` are the training ranks' clocks).
* The real SMC data already contains byte-identical node files (e.g. llama2
  result _9: node_1 = node_2, node_3 = node_7, node_4 = node_8, node_5 = node_6);
  the manifest lists such groups found in the *source* as ``preexisting_duplicates``.

Mutations (each a function ``f(src, dst, seed=..., **params) -> truth dict``
that reads the recording folder ``src`` and writes a mutated copy to ``dst``;
``dst`` may equal ``src`` for in-place use):

* :func:`clock_skew` -- each node's ``time_ms`` shifted by its own offset,
  uniform in +-``max_offset_s`` (30 s); truth: ``offsets_ms`` per node file
  (true time = logged time - offset).
* :func:`repeated_polls` -- ``fraction`` (20 %) of each node's readings written
  twice in a row (byte-identical line: same time and value); truth: the count and
  the 0-based line numbers of the inserted copies, per node.
* :func:`drop_nodes` -- removes ``n`` node files (default: a quarter, >= 1).
* :func:`truncate` -- cuts ``n`` node files (never a duplicate pair's member) at a random byte in their last 30 %
  (usually mid-line, no trailing newline); truth: kept bytes, complete lines,
  the last complete line's ``time_ms``.
* :func:`shuffle_lines` -- the lines of ``n`` node files in random order (every
  line kept, its newline included).
* :func:`duplicate_nodes` -- ``n`` node files copied byte for byte under new node
  numbers (after the highest); truth: new name -> source name.
* :func:`late_start` / :func:`early_stop` -- ``n`` nodes' logs lose their first
  (last) ``seconds`` (10-120 s) of readings. Late start: the
  ``power_measurement_start`` line moves to the first kept reading's time. Early
  stop: the ``power_measurement_stop`` line is gone (the logger was killed);
  truth: first/last reading times kept.
* :func:`change_interval` -- a 2-s meter rewritten as 1-s (a reading inserted
  between neighbours at the midpoint time, linear value, rounded like the source)
  or a 1-s meter as 2-s (every other reading dropped), for ``n`` nodes (default:
  half) -- a recording with mixed meter intervals; truth per node: old and new
  median interval [s].

Driver::

    python -m tests.blind.recordings.mutate SRC OUTDIR --seed N --n K [--kinds a,b]

copies SRC (a recording folder, or any tree containing ``power/result_*`` folders)
K times to ``OUTDIR/mut_000`` ... and applies to every recording in each copy 1-3
mutations (cycling so each kind appears), in a fixed order: change_interval,
late_start, early_stop, clock_skew, repeated_polls, shuffle_lines,
duplicate_nodes, drop_nodes, truncate. ``OUTDIR/manifest.json`` holds what was
applied (ground truth).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np

__all__ = [
    "KINDS", "find_recordings", "clock_skew", "repeated_polls", "drop_nodes", "truncate",
    "shuffle_lines", "duplicate_nodes", "late_start", "early_stop", "change_interval",
    "mutate_tree", "main",
]

NODE_RE = re.compile(r"^node_(\d+)\.txt(\.gz)?$")
TIME_RE = re.compile(rb'"time_ms": (\d+)')
VALUE_RE = re.compile(rb'"value": ([^,}]+)')
KEY_RE = re.compile(rb'"key": "([^"]+)"')


# ------------------------------------------------------------------ file access

def _node_files(folder):
    out = []
    for p in Path(folder).iterdir():
        m = NODE_RE.match(p.name)
        if m and p.is_file():
            out.append(p)
    return sorted(out, key=lambda p: int(NODE_RE.match(p.name).group(1)))


def _read(p):
    data = p.read_bytes()
    return gzip.decompress(data) if p.name.endswith(".gz") else data


def _write(p, data):
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(p)


def _lines(data):
    return data.splitlines(keepends=True)


def _eol(lines):
    for ln in lines:
        if ln.endswith(b"\r\n"):
            return b"\r\n"
        if ln.endswith(b"\n"):
            return b"\n"
    return b"\n"


def _time(line):
    m = TIME_RE.search(line)
    return int(m.group(1)) if m else None


def _key(line):
    m = KEY_RE.search(line)
    return m.group(1).decode() if m else None


def _is_reading(line):
    return _key(line) == "power_reading"


def _set_time(line, t):
    return TIME_RE.sub(b'"time_ms": ' + str(int(t)).encode(), line, count=1)


def _prepare(src, dst):
    """Copy ``src`` to ``dst`` (unless the same folder); return node files in dst."""
    src, dst = Path(src), Path(dst)
    if src.resolve() != dst.resolve():
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst)
        dst.chmod(dst.stat().st_mode | 0o700)
        for p in dst.rglob("*"):
            p.chmod(p.stat().st_mode | 0o200)
    return _node_files(dst)


def _pick(rng, files, n, default_frac):
    if n is None:
        n = max(1, int(round(default_frac * len(files))))
    n = min(int(n), len(files))
    idx = sorted(rng.choice(len(files), size=n, replace=False).tolist())
    return [files[i] for i in idx]


def _interval_s(lines):
    t = np.array([_time(ln) for ln in lines if _is_reading(ln)], dtype=float)
    t = np.sort(t)
    d = np.diff(t)
    d = d[d > 0]
    return float(np.median(d) / 1000) if d.size else float("nan")


# ------------------------------------------------------------------ mutations

def clock_skew(src, dst, seed=0, max_offset_s=30.0):
    """Shift each node's time_ms by its own offset in +-max_offset_s [s]."""
    rng = np.random.default_rng(seed)
    offsets = {}
    for p in _prepare(src, dst):
        off = int(rng.integers(-int(max_offset_s * 1000), int(max_offset_s * 1000) + 1))
        lines = [(_set_time(ln, _time(ln) + off) if _time(ln) is not None else ln) for ln in _lines(_read(p))]
        _write(p, b"".join(lines))
        offsets[p.name] = off
    return {"kind": "clock_skew", "offsets_ms": offsets, "max_offset_s": max_offset_s,
            "note": "true time = logged time_ms - offset"}


def repeated_polls(src, dst, seed=0, fraction=0.20):
    """Write ``fraction`` of each node's readings twice in a row (identical line)."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in _prepare(src, dst):
        lines = _lines(_read(p))
        # a repeated last line must keep its newline structure
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] = lines[-1] + _eol(lines)
        reading_idx = [i for i, ln in enumerate(lines) if _is_reading(ln)]
        k = int(round(fraction * len(reading_idx)))
        chosen = set(rng.choice(reading_idx, size=k, replace=False).tolist()) if k else set()
        new, inserted = [], []
        for i, ln in enumerate(lines):
            new.append(ln)
            if i in chosen:
                inserted.append(len(new))
                new.append(ln)
        _write(p, b"".join(new))
        out[p.name] = {"n_repeated": k, "inserted_line_numbers": inserted}
    return {"kind": "repeated_polls", "fraction": fraction, "nodes": out}


def drop_nodes(src, dst, seed=0, n=None, exclude=()):
    """Remove ``n`` node files (default a quarter, at least one)."""
    rng = np.random.default_rng(seed)
    files = [p for p in _prepare(src, dst) if p.name not in set(exclude)]
    if len(files) <= 1:
        return {"kind": "drop_nodes", "dropped": []}
    n = min(n if n is not None else max(1, len(files) // 4), len(files) - 1)
    gone = _pick(rng, files, n, 0.25)
    for p in gone:
        p.unlink()
    return {"kind": "drop_nodes", "dropped": [p.name for p in gone]}


def truncate(src, dst, seed=0, n=1, exclude=()):
    """Cut ``n`` node files at a random byte in their last 30 %."""
    rng = np.random.default_rng(seed)
    files = [p for p in _prepare(src, dst) if p.name not in set(exclude)] or _node_files(dst)
    out = {}
    for p in _pick(rng, files, n, 0.0):
        data = _read(p)
        cut = int(rng.integers(int(0.7 * len(data)), max(int(0.7 * len(data)) + 1, len(data) - 1)))
        kept = data[:cut]
        complete = [ln for ln in _lines(kept) if ln.endswith(b"\n")]
        times = [_time(ln) for ln in complete if _time(ln) is not None]
        _write(p, kept)
        out[p.name] = {"kept_bytes": cut, "original_bytes": len(data), "complete_lines": len(complete),
                       "ends_mid_line": not kept.endswith(b"\n"),
                       "last_complete_time_ms": max(times) if times else None}
    return {"kind": "truncate", "nodes": out}


def shuffle_lines(src, dst, seed=0, n=None):
    """Shuffle the lines of ``n`` node files (default: all)."""
    rng = np.random.default_rng(seed)
    files = _prepare(src, dst)
    chosen = files if n is None else _pick(rng, files, n, 1.0)
    for p in chosen:
        lines = _lines(_read(p))
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] = lines[-1] + _eol(lines)
        order = rng.permutation(len(lines))
        _write(p, b"".join(lines[i] for i in order))
    return {"kind": "shuffle_lines", "nodes": [p.name for p in chosen]}


def duplicate_nodes(src, dst, seed=0, n=1):
    """Copy ``n`` node files byte for byte under new node numbers."""
    rng = np.random.default_rng(seed)
    files = _prepare(src, dst)
    top = max(int(NODE_RE.match(p.name).group(1)) for p in files)
    out = {}
    for k, p in enumerate(_pick(rng, files, n, 0.0), start=1):
        gz = ".gz" if p.name.endswith(".gz") else ""
        q = p.with_name(f"node_{top + k}.txt{gz}")
        q.write_bytes(p.read_bytes())
        out[q.name] = p.name
    return {"kind": "duplicate_nodes", "copies": out}


def late_start(src, dst, seed=0, n=1, seconds=None):
    """``n`` nodes' logs lose their first ``seconds`` (10-120 s) of readings."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in _pick(rng, _prepare(src, dst), n, 0.0):
        lines = _lines(_read(p))
        s = float(rng.uniform(10, 120)) if seconds is None else float(seconds)
        t_read = [_time(ln) for ln in lines if _is_reading(ln)]
        cut = min(t_read) + s * 1000
        kept_reads = [ln for ln in lines if _is_reading(ln) and _time(ln) >= cut]
        if not kept_reads:
            continue
        first = min(_time(ln) for ln in kept_reads)
        new = []
        for ln in lines:
            if _is_reading(ln) and _time(ln) < cut:
                continue
            if _key(ln) in ("power_measurement_start", "conversion_eff"):
                ln = _set_time(ln, first)
            new.append(ln)
        _write(p, b"".join(new))
        out[p.name] = {"seconds": s, "first_reading_time_ms": first,
                       "readings_removed": len(t_read) - len(kept_reads)}
    return {"kind": "late_start", "nodes": out}


def early_stop(src, dst, seed=0, n=1, seconds=None):
    """``n`` nodes' logs lose their last ``seconds`` (10-120 s) and the stop line."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in _pick(rng, _prepare(src, dst), n, 0.0):
        lines = _lines(_read(p))
        s = float(rng.uniform(10, 120)) if seconds is None else float(seconds)
        t_read = [_time(ln) for ln in lines if _is_reading(ln)]
        cut = max(t_read) - s * 1000
        new = [ln for ln in lines
               if not (_is_reading(ln) and _time(ln) > cut) and _key(ln) != "power_measurement_stop"]
        kept = [_time(ln) for ln in new if _is_reading(ln)]
        if not kept:
            continue
        _write(p, b"".join(new))
        out[p.name] = {"seconds": s, "last_reading_time_ms": max(kept),
                       "readings_removed": len(t_read) - len(kept), "stop_line_removed": True}
    return {"kind": "early_stop", "nodes": out}


def _fmt_like(template, value):
    txt = template.strip()
    if re.fullmatch(rb"-?\d+", txt):
        return str(int(round(value))).encode()
    return repr(round(float(value), 1)).encode()


def change_interval(src, dst, seed=0, n=None, to_s=None):
    """Rewrite ``n`` nodes (default half) from 2-s to 1-s readings or from 1-s to 2-s."""
    rng = np.random.default_rng(seed)
    files = _prepare(src, dst)
    out = {}
    for p in _pick(rng, files, n, 0.5):
        lines = _lines(_read(p))
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] = lines[-1] + _eol(lines)
        old = _interval_s(lines)
        target = to_s if to_s is not None else (1.0 if old >= 1.5 else 2.0)
        reads = [i for i, ln in enumerate(lines) if _is_reading(ln)]
        new = []
        if target < old:  # upsample: insert midpoints
            nxt = {a: b for a, b in zip(reads[:-1], reads[1:])}
            for i, ln in enumerate(lines):
                new.append(ln)
                if i in nxt:
                    j = nxt[i]
                    t0, t1 = _time(ln), _time(lines[j])
                    v0 = float(VALUE_RE.search(ln).group(1))
                    v1 = float(VALUE_RE.search(lines[j]).group(1))
                    mid = ln
                    mid = _set_time(mid, (t0 + t1) // 2)
                    raw = VALUE_RE.search(ln).group(1)
                    mid = VALUE_RE.sub(b'"value": ' + _fmt_like(raw, (v0 + v1) / 2), mid, count=1)
                    new.append(mid)
        else:  # downsample: drop every other reading
            drop = set(reads[1::2])
            new = [ln for i, ln in enumerate(lines) if i not in drop]
        _write(p, b"".join(new))
        out[p.name] = {"old_interval_s": old, "new_interval_s": _interval_s(new)}
    return {"kind": "change_interval", "nodes": out}


KINDS = {
    "change_interval": change_interval,
    "late_start": late_start,
    "early_stop": early_stop,
    "clock_skew": clock_skew,
    "repeated_polls": repeated_polls,
    "shuffle_lines": shuffle_lines,
    "duplicate_nodes": duplicate_nodes,
    "drop_nodes": drop_nodes,
    "truncate": truncate,
}


# ------------------------------------------------------------------ driver

def find_recordings(root):
    """Folders under ``root`` (itself included) that hold node_N.txt[.gz] files."""
    root = Path(root)
    found = [root] if _node_files(root) else []
    found += sorted({p.parent for p in root.rglob("node_*.txt*") if NODE_RE.match(p.name)} - {root})
    return found


def _duplicate_groups(folder):
    groups = {}
    for p in _node_files(folder):
        groups.setdefault(hashlib.sha256(p.read_bytes()).hexdigest(), []).append(p.name)
    return [g for g in groups.values() if len(g) > 1]


def mutate_tree(src, out, seed=0, n=5, kinds=None):
    """Write ``n`` mutated copies of ``src`` under ``out`` and ``out/manifest.json``."""
    src, out = Path(src), Path(out)
    kinds = list(kinds or KINDS)
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"unknown mutation {k!r}; known: {list(KINDS)}")
    recs = find_recordings(src)
    if not recs:
        raise FileNotFoundError(f"no node_N.txt[.gz] files under {src}")
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"src": str(src), "seed": int(seed), "n": int(n), "order": list(KINDS),
                "recordings": []}
    for i in range(n):
        dst = out / f"mut_{i:03d}"
        _prepare(src, dst)
        m = int(rng.integers(1, 4))
        pick = {kinds[(i + j) % len(kinds)] for j in range(min(m, len(kinds)))}
        applied = [k for k in KINDS if k in pick]
        entry = {"dir": dst.name, "mutations": applied, "recordings": []}
        for rec in recs:
            rel = rec.relative_to(src)
            folder = dst / rel
            rec_entry = {"recording": str(rel), "preexisting_duplicates": _duplicate_groups(rec),
                         "applied": []}
            for k in applied:
                sub_seed = int(rng.integers(2**31))
                kw = {}
                if k in ("drop_nodes", "truncate"):
                    dups = [t for a in rec_entry["applied"] if a["kind"] == "duplicate_nodes"
                            for t in a["copies"].items()]
                    kw["exclude"] = [name for pair in dups for name in pair]
                truth = KINDS[k](folder, folder, seed=sub_seed, **kw)
                truth["seed"] = sub_seed
                rec_entry["applied"].append(truth)
            entry["recordings"].append(rec_entry)
        manifest["recordings"].append(entry)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
    return manifest


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.blind.recordings.mutate", description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--kinds", default=None, help="comma-separated subset of " + ",".join(KINDS))
    a = ap.parse_args(argv)
    kinds = a.kinds.split(",") if a.kinds else None
    man = mutate_tree(a.src, a.outdir, seed=a.seed, n=a.n, kinds=kinds)
    print(f"wrote {len(man['recordings'])} mutated copies of {len(man['recordings'][0]['recordings'])} "
          f"recording(s) to {a.outdir}; manifest.json has the ground truth")
    return 0


if __name__ == "__main__":
    sys.exit(main())
