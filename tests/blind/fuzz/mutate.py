"""Hostile values and file mutations for the CLI fuzzer (independent of powerlab's code).

Every mutation takes a ``random.Random`` and returns new content plus a short label that
names what was done (recorded in ``cases.jsonl``).  Sizes are bounded: the largest file a
mutation writes is a few MB.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import re
import shutil
from pathlib import Path

__all__ = [
    "NUMERIC_VALUES",
    "hostile_value",
    "mutate_text",
    "mutate_path",
]

HUGE_STRING = "A" * 100_000  # below Linux's 128 KiB limit on one argv string
DIGITS_400 = "9" * 400

#: what every numeric-looking option is given (the brief's list first)
NUMERIC_VALUES = [
    "NaN",
    "nan",
    "inf",
    "-inf",
    "1e18",
    "-1",
    "0",
    "",
    DIGITS_400,
    "true",
    HUGE_STRING,
    "1e309",
    "-0",
    "1e-300",
    "9223372036854775808",
    "-9223372036854775809",
    "0x10",
    "1_000",
    " 3 ",
    "\u0663",
    "2**63",
    "1.5",
    "-1e18",
    "+inf",
    "Infinity",
    "None",
]

TIME_VALUES = [
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "1677-09-21T00:12:43Z",
    "2262-04-11T23:47:17Z",
    "2262-04-12T00:00:00Z",
    "2024-02-30T00:00Z",
    "2025-06-02T25:00Z",
    "2025-06-02T12:00:00",
    "NaT",
    "now",
    "",
    "1e18",
    DIGITS_400,
    "-1",
    "2025-06-02T12:00:00+99:00",
    "2025-13-01",
    "20250602",
    "2025-06-02T12:10:00Z",
    "2025-06-02T14:00:00Z",
    "true",
    HUGE_STRING,
]
TZ_VALUES = [
    "Mars/Olympus_Mons",
    "",
    "UTC+99",
    "../../../etc/passwd",
    "America/New_York",
    "UTC",
    "Etc/GMT+14",
    "+05:30",
    "EST5EDT",
    "x" * 5000,
    "\x01",
    "America/New_York\n",
    "nan",
]
FREQ_VALUES = [
    "0min",
    "-1min",
    "1e18min",
    "7min",
    "1ns",
    "",
    "NaN",
    "1min",
    "25h",
    "1D",
    "x",
    "1Y",
    DIGITS_400 + "s",
    "0.5s",
    "1e-9s",
]
STRING_VALUES = [
    "",
    "\x7f",
    HUGE_STRING,
    "-",
    "--",
    "../..",
    "a,b,,c",
    "=",
    "nan",
    "\u202e\u0041",
    "power_cap,power_cap",
    "bogus",
    "ÿ" * 100,
    "%s%n",
    "'; DROP TABLE x; --",
    "\n",
]
ADDRESS_VALUES = [
    "tcp://127.0.0.1:1",
    "tcp://256.0.0.1:8786",
    "",
    "nonsense",
    "tcp://[::1]:99999",
    "inproc://x",
    "tcp://127.0.0.1:" + DIGITS_400,
]


def hostile_value(role: str, rng: random.Random, choices=None) -> str:
    if role == "numeric":
        return rng.choice(NUMERIC_VALUES)
    if role == "time":
        return rng.choice(TIME_VALUES)
    if role == "tz":
        return rng.choice(TZ_VALUES)
    if role == "freq":
        return rng.choice(FREQ_VALUES)
    if role == "address":
        return rng.choice(ADDRESS_VALUES)
    if role == "choice":
        base = rng.choice(choices or ["x"])
        return rng.choice([base.upper(), base + " ", "", "bogus", base * 50, "\x1b" + base])
    return rng.choice(STRING_VALUES + NUMERIC_VALUES[:11])


# ---------------------------------------------------------------- text mutations

_NUM = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
_INT = re.compile(rb"(?<![\w.])\d{1,19}(?![\w.])")
_DATE = re.compile(rb"\d{4}[-/]\d{2}[-/]\d{2}")
_EPOCH_MS = re.compile(rb"(?<!\d)1[67]\d{11}(?!\d)")

BAD_DATES = [
    b"9999-12-31",
    b"0000-00-00",
    b"1677-09-20",
    b"2262-04-12",
    b"2025-02-30",
    b"1970-01-01",
    b"3000-01-01",
    b"0001-01-01",
    b"2025-13-45",
]
WRONG_TYPES = [b"true", b"false", b"null", b"~", b"[]", b"{}", b"abc", b'""', b"yes", b"-"]
NONFINITE = [
    b"nan",
    b"NaN",
    b"inf",
    b"-inf",
    b".nan",
    b".inf",
    b"-.inf",
    b"Infinity",
    b"1e309",
    b"-1e309",
]


def _sub_one(rx, data: bytes, repl_fn, rng: random.Random, count: int = 1) -> bytes:
    ms = list(rx.finditer(data))
    if not ms:
        return data
    picks = sorted(rng.sample(ms, min(count, len(ms))), key=lambda m: m.start(), reverse=True)
    for m in picks:
        data = data[: m.start()] + repl_fn(m.group(0)) + data[m.end() :]
    return data


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def m_byte_flip(d, rng):
    if not d:
        return b"\xff", "byte_flip(empty)"
    b = bytearray(d)
    n = rng.choice([1, 1, 2, 8, 64])
    for _ in range(n):
        i = rng.randrange(len(b))
        b[i] ^= rng.randrange(1, 256)
    return bytes(b), f"byte_flip x{n}"


def m_truncate(d, rng):
    i = rng.randrange(len(d) + 1) if d else 0
    return d[:i], f"truncate at {i}/{len(d)}"


def m_number_bloat(d, rng):
    k = rng.choice([1, 1, 3, 20])
    return _sub_one(
        _NUM, d, lambda s: DIGITS_400.encode(), rng, k
    ), f"number_bloat(400 digits) x{k}"


def m_id_overflow(d, rng):
    v = rng.choice(
        [
            b"18446744073709551616",
            b"18446744073709551615",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"340282366920938463463374607431768211456",
        ]
    )
    return _sub_one(_INT, d, lambda s: v, rng, rng.choice([1, 3])), f"id_overflow {v.decode()}"


def m_date_range(d, rng):
    v = rng.choice(BAD_DATES)
    if _EPOCH_MS.search(d) and rng.random() < 0.5:
        ms = rng.choice([b"99999999999999999", b"-1", b"0", b"9223372036854775807", b"1e30"])
        return _sub_one(
            _EPOCH_MS, d, lambda s: ms, rng, rng.choice([1, 5])
        ), f"epoch_ms {ms.decode()}"
    out = _sub_one(_DATE, d, lambda s: v, rng, rng.choice([1, 1, 5]))
    return out, f"date_out_of_range {v.decode()}"


def m_wrong_type(d, rng):
    v = rng.choice(WRONG_TYPES)
    return _sub_one(_NUM, d, lambda s: v, rng, rng.choice([1, 3])), f"wrong_type {v.decode()}"


def m_nonfinite(d, rng):
    v = rng.choice(NONFINITE)
    return _sub_one(_NUM, d, lambda s: v, rng, rng.choice([1, 3, 30])), f"nonfinite {v.decode()}"


def m_negative(d, rng):
    return _sub_one(
        _NUM, d, lambda s: b"-" + s.lstrip(b"-") + b"e9", rng, rng.choice([1, 5])
    ), "negative_huge"


def m_zero(d, rng):
    return _sub_one(_NUM, d, lambda s: b"0", rng, rng.choice([1, 5, 50])), "zero_numbers"


def m_dup_lines(d, rng):
    ls = _lines(d)
    if len(ls) < 2:
        return d + d, "dup_whole"
    i = rng.randrange(len(ls))
    k = rng.choice([1, 2, 100])
    ls[i:i] = [ls[i]] * k
    return b"\n".join(ls), f"dup_line {i} x{k}"


def m_dup_all(d, rng):
    return d + (b"" if d.endswith(b"\n") else b"\n") + d, "dup_all_lines"


def m_shuffle(d, rng):
    ls = _lines(d)
    head, body = ls[:1], ls[1:]
    rng.shuffle(body)
    return b"\n".join(head + body), "shuffle_lines"


def m_delete_lines(d, rng):
    ls = _lines(d)
    if len(ls) < 2:
        return b"", "delete_all"
    i = rng.randrange(len(ls))
    j = min(len(ls), i + rng.choice([1, 1, 5, 50]))
    return b"\n".join(ls[:i] + ls[j:]), f"delete_lines {i}:{j}"


def m_nul(d, rng):
    i = rng.randrange(len(d) + 1) if d else 0
    k = rng.choice([1, 16, 4096])
    return d[:i] + b"\x00" * k + d[i:], f"nul x{k} at {i}"


def m_huge(d, rng):
    target = rng.choice([2, 4]) * 1024 * 1024
    ls = _lines(d)
    body = b"\n".join(ls[1:]) if len(ls) > 2 else d
    if not body:
        body = b"x"
    reps = max(1, target // (len(body) + 1))
    return (d + b"\n" + (body + b"\n") * reps)[: target + len(d)], f"huge ~{target >> 20} MB"


def m_long_line(d, rng):
    n = rng.choice([1 << 16, 1 << 21])
    return d + b"\n" + b"9" * n, f"long_line {n}"


def m_utf16(d, rng):
    try:
        return d.decode("utf-8").encode("utf-16"), "utf16"
    except UnicodeDecodeError:
        return d, "utf16(skipped)"


def m_bom(d, rng):
    return b"\xef\xbb\xbf" + d, "bom"


def m_crlf(d, rng):
    return d.replace(b"\n", b"\r\n"), "crlf"


def m_cr_only(d, rng):
    return d.replace(b"\n", b"\r"), "cr_only"


def m_empty(d, rng):
    return b"", "empty"


def m_header_only(d, rng):
    return _lines(d)[0] + b"\n", "header_only"


def m_garbage(d, rng):
    return bytes(rng.randrange(256) for _ in range(rng.choice([16, 4096]))), "random_bytes"


def m_control(d, rng):
    i = rng.randrange(len(d) + 1) if d else 0
    return d[:i] + rng.choice([b"\x1b[2J", b"\x7f", b"\x0b\x0c", b"\xc3\x28", b"\xed\xa0\x80"]) + d[
        i:
    ], "control_chars"


TEXT_MUTATIONS = [
    m_byte_flip,
    m_truncate,
    m_number_bloat,
    m_id_overflow,
    m_date_range,
    m_wrong_type,
    m_nonfinite,
    m_negative,
    m_zero,
    m_dup_lines,
    m_dup_all,
    m_shuffle,
    m_delete_lines,
    m_nul,
    m_huge,
    m_long_line,
    m_utf16,
    m_bom,
    m_crlf,
    m_cr_only,
    m_empty,
    m_header_only,
    m_garbage,
    m_control,
]


# ------------------------------------------------------------- structured mutations

DEEP = 100_000


def deep_json(rng) -> bytes:
    kind = rng.choice(["list", "dict"])
    if kind == "list":
        return b"[" * DEEP + b"]" * DEEP
    return b'{"a":' * DEEP + b"1" + b"}" * DEEP


def deep_yaml(rng) -> bytes:
    kind = rng.choice(["flow", "block"])
    if kind == "flow":
        return b"name: x\njobs: " + b"[" * DEEP + b"]" * DEEP + b"\n"
    # block nesting: bounded to a few MB
    n = 2000
    return b"".join(b" " * i + b"a:\n" for i in range(n)) + b" " * n + b"b: 1\n"


def yaml_bomb(rng) -> bytes:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(
            f"{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]"
        )
        prev = name
    lines.append(f"jobs: *{prev}")
    return ("\n".join(lines) + "\n").encode()


HOSTILE_LEAVES = [
    float("nan"),
    float("inf"),
    float("-inf"),
    -1,
    0,
    10**18,
    int(DIGITS_400),
    True,
    False,
    None,
    "",
    "A" * 100_000,
    [],
    {},
    [1, 2],
    {"x": 1},
    2**64,
    -(2**63) - 1,
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "nan",
    1e-300,
]


def _leaves(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, path + (k,))
        if not obj:
            yield path
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, path + (i,))
        if not obj:
            yield path
    else:
        yield path


def _containers(obj, path=()):
    if isinstance(obj, (dict, list)):
        yield path
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for k, v in items:
            yield from _containers(v, path + (k,))


def _get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def _set(obj, path, value):
    if not path:
        return value
    _get(obj, path[:-1])[path[-1]] = value
    return obj


def mutate_tree(obj, rng):
    """A structural change of a parsed YAML/JSON document; returns (obj, label)."""
    import copy

    obj = copy.deepcopy(obj)
    op = rng.choice(["leaf", "leaf", "leaf", "delete", "add", "swap_container", "dup_list"])
    leaves = list(_leaves(obj))
    if op == "leaf" and leaves:
        path = rng.choice(leaves)
        v = rng.choice(HOSTILE_LEAVES)
        obj = _set(obj, path, v)
        return obj, f"leaf {'/'.join(map(str, path))} = {str(v)[:40]}"
    conts = list(_containers(obj))
    if not conts:
        return rng.choice(HOSTILE_LEAVES), "root replaced"
    path = rng.choice(conts)
    c = _get(obj, path)
    where = "/".join(map(str, path)) or "<root>"
    if op == "delete" and c:
        k = rng.choice(list(c.keys()) if isinstance(c, dict) else list(range(len(c))))
        del c[k]
        return obj, f"delete {where}/{k}"
    if op == "add":
        if isinstance(c, dict):
            c[rng.choice(["unknown_key", "__proto__", "name", "", "1"])] = rng.choice(
                HOSTILE_LEAVES
            )
        else:
            c.append(rng.choice(HOSTILE_LEAVES))
        return obj, f"add to {where}"
    if op == "swap_container":
        new = list(c.values()) if isinstance(c, dict) else {str(i): v for i, v in enumerate(c)}
        obj = _set(obj, path, new)
        return obj, f"swap dict/list at {where}"
    if op == "dup_list" and isinstance(c, list) and c:
        c.extend([c[0]] * rng.choice([1, 50, 2000]))
        return obj, f"dup list items at {where}"
    return obj, "noop"


def mutate_yaml(d: bytes, rng) -> tuple[bytes, str]:
    import yaml

    r = rng.random()
    if r < 0.05:
        return deep_yaml(rng), "deep_yaml_100k"
    if r < 0.08:
        return yaml_bomb(rng), "yaml_bomb"
    if r < 0.12:
        return d + b"\n" + d, "duplicate_keys(doc twice)"
    if r < 0.15:
        return b"!!python/object/apply:os.system ['echo pwned > pwned.txt']\n", "yaml_python_tag"
    try:
        obj = yaml.safe_load(d)
        obj, label = mutate_tree(obj, rng)
        return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True).encode(), "yaml " + label
    except Exception:
        return mutate_text(d, rng)


def mutate_json(d: bytes, rng) -> tuple[bytes, str]:
    r = rng.random()
    if r < 0.08:
        return deep_json(rng), "deep_json_100k"
    if r < 0.11:
        return b'{"events": [' + b",".join([d] * 2000) + b"]}", "json_many_events"
    try:
        obj = json.loads(d)
        obj, label = mutate_tree(obj, rng)
        return json.dumps(obj, allow_nan=True).encode(), "json " + label
    except Exception:
        return mutate_text(d, rng)


def mutate_text(d: bytes, rng) -> tuple[bytes, str]:
    n = rng.choice([1, 1, 1, 2])
    labels = []
    for _ in range(n):
        f = rng.choice(TEXT_MUTATIONS)
        d, lab = f(d, rng)
        labels.append(lab)
    return d, "+".join(labels)


# ---------------------------------------------------------------- parquet mutations


def mutate_parquet(path: Path, rng) -> str:
    """Rewrite a Parquet file with a structural change, or damage its bytes."""
    if rng.random() < 0.35:
        d = path.read_bytes()
        d, lab = rng.choice([m_byte_flip, m_truncate, m_garbage, m_empty, m_nul])(d, rng)
        path.write_bytes(d)
        return "parquet bytes " + lab
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    cols = t.column_names
    op = rng.choice(
        [
            "nan",
            "inf",
            "neg",
            "str",
            "ts",
            "dup",
            "shuffle",
            "drop",
            "rename",
            "empty",
            "bigid",
            "bool",
            "null",
            "widen",
        ]
    )
    num = [
        c
        for c in cols
        if pa.types.is_floating(t.schema.field(c).type)
        or pa.types.is_integer(t.schema.field(c).type)
    ]
    tsc = [c for c in cols if pa.types.is_timestamp(t.schema.field(c).type)]
    n = t.num_rows
    lab = op
    try:
        if op in ("nan", "inf", "neg", "str", "bool", "null", "bigid") and num:
            c = rng.choice(num)
            i = cols.index(c)
            if op == "nan":
                arr = pa.array(np.full(n, np.nan))
            elif op == "inf":
                arr = pa.array(np.where(np.arange(n) % 2 == 0, np.inf, -np.inf))
            elif op == "neg":
                arr = pa.array(np.full(n, -1e300))
            elif op == "str":
                arr = pa.array(["x"] * n)
            elif op == "bool":
                arr = pa.array([True] * n)
            elif op == "null":
                arr = pa.nulls(n, t.schema.field(c).type)
            else:
                arr = pa.array(np.full(n, 2**64 - 1, dtype=np.uint64))
            t = t.set_column(i, pa.field(c, arr.type), arr)
            lab = f"{op} column {c}"
        elif op == "ts" and tsc:
            c = rng.choice(tsc)
            i = cols.index(c)
            v = rng.choice([np.iinfo(np.int64).max - 1, np.iinfo(np.int64).min + 1, 0, -1])
            arr = pa.array(np.full(n, v, dtype=np.int64)).cast(t.schema.field(c).type)
            t = t.set_column(i, t.schema.field(c), arr)
            lab = f"timestamp {c} = {v}"
        elif op == "dup":
            t = pa.concat_tables([t, t])
        elif op == "shuffle":
            idx = list(range(n))
            rng.shuffle(idx)
            t = t.take(pa.array(idx, type=pa.int64()))
        elif op == "drop" and cols:
            c = rng.choice(cols)
            t = t.drop([c])
            lab = f"drop column {c}"
        elif op == "rename" and cols:
            c = rng.choice(cols)
            t = t.rename_columns([("x_" + x if x == c else x) for x in cols])
            lab = f"rename column {c}"
        elif op == "empty":
            t = t.slice(0, 0)
        elif op == "widen":
            t = t.append_column("extra_\u00ff", pa.array(["A" * 1000] * n))
        pq.write_table(t, path)
    except Exception as exc:  # the mutation itself failed: damage bytes instead
        d, l2 = m_byte_flip(path.read_bytes(), rng)
        path.write_bytes(d)
        lab = f"{op} failed ({type(exc).__name__}); {l2}"
    return "parquet " + lab


# -------------------------------------------------------------- files and folders


def _mutate_file(path: Path, rng) -> str:
    name = path.name
    if name.endswith(".parquet"):
        return mutate_parquet(path, rng)
    if name.endswith(".gz"):
        raw = path.read_bytes()
        if rng.random() < 0.2:
            d, lab = rng.choice([m_byte_flip, m_truncate, m_garbage])(raw, rng)
            path.write_bytes(d)
            return "gzip bytes " + lab
        try:
            inner = gzip.decompress(raw)
        except Exception:
            inner = raw
        d, lab = mutate_text(inner, rng)
        if rng.random() < 0.2:  # same name, no longer compressed
            path.write_bytes(d)
            return "gz name, plain " + lab
        path.write_bytes(gzip.compress(d, compresslevel=1))
        return "gz(" + lab + ")"
    d = path.read_bytes()
    if name.endswith((".yaml", ".yml")) and rng.random() < 0.6:
        d, lab = mutate_yaml(d, rng)
    elif name.endswith(".json") and rng.random() < 0.6:
        d, lab = mutate_json(d, rng)
    else:
        d, lab = mutate_text(d, rng)
    path.write_bytes(d)
    return lab


def mutate_path(path: Path, rng: random.Random) -> str:
    """Mutate a copied seed in place (a file, or one file or the layout of a folder)."""
    if path.is_file():
        return _mutate_file(path, rng)
    files = [p for p in sorted(path.rglob("*")) if p.is_file()]
    r = rng.random()
    if not files or r < 0.08:
        (path / "junk.parquet").write_bytes(
            b"PAR1" + hashlib.sha256(b"junk").digest() * 2 + b"PAR1"
        )
        return "folder: foreign junk.parquet added"
    f = rng.choice(files)
    rel = f.relative_to(path)
    if r < 0.16:
        f.unlink()
        return f"folder: deleted {rel}"
    if r < 0.22:
        shutil.copy2(f, f.with_name("copy-" + f.name))
        return f"folder: duplicated {rel}"
    if r < 0.26:
        for p in files:
            p.unlink()
        return "folder: emptied"
    if r < 0.30:
        sub = path
        for i in range(rng.choice([50, 200])):
            sub = sub / "d"
        sub.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, sub / f.name)
        return f"folder: {rel} copied 50+ levels deep"
    return f"folder file {rel}: " + _mutate_file(f, rng)


def gz_text(path: Path) -> bytes:
    with gzip.open(path, "rb") as fh:
        return fh.read()


def _unused(_=io):  # keep io imported for gzip streams in callers
    return None
