"""The nvidia-smi reader's CSV pass in nvidia-smi's own dialect (powerlab.iotools._smi_fast)
against a straightforward reference parse and against the reader's general path.

The reference is written here on purpose in the plainest way: ``pandas.read_csv`` of the
cells as text, then per column the unit stripped, sentinels to NaN and Python's
``float`` (correctly rounded), the timestamps by ``pandas.to_datetime`` with nvidia-smi's
format.  The fast path must give exactly those values in file order, and the reader must
give exactly the same frame (or the same error) with the fast path and without it.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools import _smi_fast, nvidia_smi, read_nvidia_smi

from ..conftest import SHARED_DATA

CKPT100 = SHARED_DATA / "nvidia-smi-h100-100ms" / "h100-traces_ckpt100.csv"
MIB = 1024.0 * 1024.0

pytestmark = pytest.mark.skipif(not _smi_fast.EXACT_FLOATS,
                                reason="the fast path needs pandas >= 3")


def reference(path, tz) -> pd.DataFrame:
    """Cells as text, converted column by column, in file order (no GPU attribution)."""
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    out = {}
    for head in raw.columns:
        name, _, unit = head.strip().partition(" [")
        unit = unit.rstrip("]")
        cells = raw[head].str.strip()
        if name == "timestamp":
            t = pd.to_datetime(cells, format="%Y/%m/%d %H:%M:%S.%f")
            out["timestamp"] = t.dt.tz_localize(tz).dt.tz_convert("UTC").dt.as_unit("ns")
            continue
        if name in ("uuid", "pci.bus_id"):
            out[name] = cells
            continue

        def number(cell: str, unit=unit) -> float:
            if cell.startswith("[") or cell in ("N/A", ""):
                return np.nan
            if unit and cell.endswith(" " + unit):
                cell = cell[:-len(unit) - 1]
            return float(cell)
        out[name] = cells.map(number).astype("float64")
    return pd.DataFrame(out)


def fast_columns(path, tz):
    """``_smi_fast.fast_columns`` of a file, as the reader calls it."""
    data = path.read_bytes()
    names, _units, _cells, present, first_end = nvidia_smi._read_header(data, None, path)
    start, end, _ = nvidia_smi._body_bounds(data, present, first_end)
    wanted = nvidia_smi._wanted_fields(names)
    by_order = not {"gpu_index", "pci_bus_id", "gpu_uuid"} & wanted.keys()
    return _smi_fast.fast_columns(data, start, end,
                                  [nvidia_smi.VARIABLE_MAP.get(n) for n in names],
                                  wanted, tz, by_order)


def outcome(path, tz, *, fast: bool, monkeypatch):
    """The reader's frame (or error text) and its warnings, with or without the fast path."""
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(_smi_fast, "fast_columns", lambda *a, **k: None)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                result = read_nvidia_smi(path, tz=tz)
            except ParseError as exc:
                result = f"ParseError: {exc}"
    return result, [str(x.message) for x in w if issubclass(x.category, DataQualityWarning)]


def assert_same_outcome(path, tz, monkeypatch):
    fast, fast_warn = outcome(path, tz, fast=True, monkeypatch=monkeypatch)
    general, general_warn = outcome(path, tz, fast=False, monkeypatch=monkeypatch)
    if isinstance(general, str) or isinstance(fast, str):
        assert fast == general
    else:
        pd.testing.assert_frame_equal(fast, general, check_exact=True)
    assert fast_warn == general_warn
    return fast


def assert_matches_reference(cols, repeats, path, tz):
    ref = reference(path, tz)
    assert np.array_equal(np.asarray(cols["timestamp"][0].asi8), ref["timestamp"].astype("int64"))
    pairs = {"power_w": ("power.draw", 1.0), "util_gpu_pct": ("utilization.gpu", 1.0),
             "memory_used_bytes": ("memory.used", MIB), "temp_gpu_c": ("temperature.gpu", 1.0),
             "gpu_index": ("index", 1.0)}
    for canon, (field, factor) in pairs.items():
        if field in ref:
            got = np.asarray(cols[canon], dtype=np.float64)
            assert np.array_equal(got, ref[field].to_numpy() * factor), canon
    if repeats is not None:
        lines = path.read_bytes().splitlines()[1:]
        assert np.array_equal(repeats, [a == b for a, b in itertools.pairwise(lines)])


def test_real_trace_fast_path_matches_the_reference_and_the_general_path(monkeypatch):
    """The real 8 x H100 100 ms trace: the fast path reads it, every value equals the
    reference parse in file order, and the reader's frame is the general path's."""
    if not CKPT100.is_file():
        pytest.skip(f"shared real data not found at {CKPT100}")
    tz = "America/Los_Angeles"
    got = fast_columns(CKPT100, tz)
    assert got is not None  # the plain nvidia-smi shape takes the fast path
    cols, repeats = got
    assert len(cols["power_w"]) == 54_432
    assert_matches_reference(cols, repeats, CKPT100, tz)
    df = assert_same_outcome(CKPT100, tz, monkeypatch)
    assert len(df) == 54_024 and sorted(df["gpu_index"].unique()) == list(range(8))


def _lines(rows) -> str:
    return "".join(", ".join(r) + "\n" for r in rows)


HEAD_INDEX = "timestamp, index, power.draw [W], utilization.gpu [%], memory.used [MiB], " \
             "temperature.gpu\n"


def adversarial_shapes() -> str:
    """Index field, a third GPU appearing mid-file, numbers written in several ways
    (``72.3``/``72.30``, ``1e2``, leading zeros), values with and without units."""
    rows = []
    for q in range(6):
        gpus = [0, 1, 2] if q >= 3 else [0, 1]
        for g in gpus:
            ms = 155 + 100 * q + 2 * g
            power = ["72.3", "72.30", "1e2", "0072.5", "699.99", "0.1"][(q + g) % 6]
            rows.append([f"2025/07/27 00:34:{45 + q // 10:02d}.{ms % 1000:03d}", str(g),
                         f"{power} W", f"{(7 * q + g) % 101} %", f"{17 + 1000 * g} MiB",
                         str(30 + q)])
    return HEAD_INDEX + _lines(rows)


def test_adversarial_shapes_fast_path_matches_reference_and_general_path(tmp_path,
                                                                          monkeypatch):
    f = tmp_path / "smi.csv"
    f.write_text(adversarial_shapes())
    got = fast_columns(f, "UTC")
    assert got is not None
    assert_matches_reference(got[0], got[1], f, "UTC")
    df = assert_same_outcome(f, "UTC", monkeypatch)
    assert df.groupby("gpu_index").size().tolist() == [6, 6, 3]  # GPU 2 from query 4 on
    assert df.loc[df["gpu_index"] == 2, "timestamp"].min() == \
        pd.Timestamp("2025-07-27 00:34:45.459", tz="UTC")


def test_sentinels_units_and_extra_spaces_take_the_general_path(tmp_path, monkeypatch):
    """[N/A], [Not Supported] and a doubled space are not in the fast dialect: the fast
    path declines, and the reader's values equal the reference's."""
    text = adversarial_shapes().splitlines(keepends=True)
    text[2] = text[2].replace("72.30 W", "[N/A]")
    text[3] = text[3].replace(" %,", " %,  ", 1)  # ",   1017 MiB": extra spaces
    text[5] = text[5].rsplit(", ", 1)[0] + ", [Not Supported]\n"
    f = tmp_path / "smi.csv"
    f.write_text("".join(text))
    assert fast_columns(f, "UTC") is None
    df = assert_same_outcome(f, "UTC", monkeypatch)
    ref = reference(f, "UTC")
    ref = ref.assign(gpu=ref["index"]).sort_values(["gpu", "timestamp"], kind="stable")
    assert np.array_equal(df["power_w"].to_numpy(), ref["power.draw"].to_numpy(),
                          equal_nan=True)
    assert np.array_equal(df["temp_gpu_c"].to_numpy(), ref["temperature.gpu"].to_numpy(),
                          equal_nan=True)
    assert np.array_equal(df["memory_used_bytes"].to_numpy(),
                          ref["memory.used"].to_numpy() * MIB)
    assert df["power_w"].isna().sum() == 1 and df["temp_gpu_c"].isna().sum() == 1


HEAD = "timestamp, power.draw [W], utilization.gpu [%], memory.used [MiB]\n"


def by_order_log(n_queries: int = 6, n_gpus: int = 2) -> list[str]:
    """A log without a GPU field, ``n_gpus`` rows per query 2 ms apart, queries 100 ms
    apart (as nvidia-smi -lms 100 writes it)."""
    out = []
    for q in range(n_queries):
        for g in range(n_gpus):
            ms = 100 * q + 2 * g
            out.append(f"2025/07/27 00:34:{45 + ms // 1000:02d}.{ms % 1000:03d}, "
                       f"{70 + q + 0.25 * g:.2f} W, {q} %, {17 + g} MiB\n")
    return out


def edit(old: str, new: str, row: int = 3):
    """A mutation replacing ``old`` by ``new`` in one row (which must hold it)."""
    def apply(rows: list[str]) -> list[str]:
        assert old in rows[row], (old, rows[row])
        return rows[:row] + [rows[row].replace(old, new, 1)] + rows[row + 1:]
    return apply


def everywhere(old: str, new: str):
    def apply(rows: list[str]) -> list[str]:
        assert any(old in r for r in rows)
        return [r.replace(old, new) for r in rows]
    return apply


# row 3 of by_order_log() is "2025/07/27 00:34:45.102, 71.25 W, 1 %, 18 MiB"
MUTATIONS = {
    "clean": lambda r: r,
    "boolean TRUE": edit("71.25 W", "TRUE W"),
    "boolean tRuE in a whole column": lambda r: [x.rsplit(", ", 1)[0] + ", tRuE MiB\n"
                                                 for x in r],
    "tab after a number": edit("71.25 W", "71.25\t W"),
    "tab before a number": edit(" 71.25 W", " \t71.25 W"),
    "minus zero": edit(" 1 %", " -0 %"),
    "negative power": edit("71.25 W", "-5 W"),
    "nan": edit("71.25 W", "nan W"),
    "inf": edit("71.25 W", "inf W"),
    "huge": edit("71.25 W", "1e400 W"),
    "exponent": edit("71.25 W", "7.125e1 W"),
    "quoted cell": edit("71.25 W", '"71.25 W"'),
    "two spaces": edit("71.25 W", "71.25  W"),
    "other unit": edit("71.25 W", "71.25 kW"),
    "unit missing": edit("71.25 W", "71.25"),
    "units nowhere": lambda r: [x.replace(" W,", ",").replace(" %,", ",")
                                .replace(" MiB", "") for x in r],
    "blank line": lambda r: r[:4] + ["\n"] + r[4:],
    "spaces-only line": lambda r: r[:4] + ["   \n"] + r[4:],
    "CRLF": everywhere("\n", "\r\n"),
    "lone CR": everywhere("\n", "\r"),
    "trailing space": edit("\n", " \n"),
    "extra cell": edit("\n", ", 5 W\n"),
    "missing cell": edit(", 18 MiB", ""),
    "repeated header": lambda r: r[:4] + [HEAD] + r[4:],
    "truncated last line": lambda r: r[:-1] + [r[-1].rstrip("\n")[:-4]],
    "hour 24": edit("00:34:45", "24:34:45"),
    "second 60": edit("00:34:45", "00:34:60"),
    "month 13": edit("2025/07/27", "2025/13/27"),
    "ISO date": everywhere("2025/07/27", "2025-07-27"),
    "day changes": lambda r: r[:6] + [x.replace("2025/07/27", "2025/07/28") for x in r[6:]],
    "microseconds": edit(".102,", ".102123,"),
    "fullwidth digits": edit("71.25 W", "\uff17\uff11 W"),
    "duplicated line": lambda r: r[:3] + [r[3]] + r[3:],
    "same values, other spelling": lambda r: r[:4] + [r[3].replace("71.25 W", "71.250 W")]
    + r[5:],
    "same line twice, other spelling": lambda r: r[:4] + [r[3].replace("71.25 W", "71.250 W")]
    + r[4:],
}


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("name", list(MUTATIONS))
def test_fast_path_gives_the_general_paths_result_or_error(name, tmp_path, monkeypatch):
    """Each damage or odd spelling: the same frame, warnings or ParseError (with its line
    and column) with the fast path as without it."""
    f = tmp_path / "smi.csv"
    f.write_bytes((HEAD + "".join(MUTATIONS[name](by_order_log()))).encode("utf-8"))
    assert_same_outcome(f, "UTC", monkeypatch)


def test_clean_log_and_reference_agree_and_fast_path_is_taken(tmp_path):
    f = tmp_path / "smi.csv"
    f.write_text(HEAD + "".join(by_order_log()))
    got = fast_columns(f, "UTC")
    assert got is not None
    assert_matches_reference(got[0], got[1], f, "UTC")


# --- logs with index and uuid: every UUID has dashes and GPU 0 has index 0 ---------------

HEAD_UUID = ("timestamp, index, uuid, power.draw [W], utilization.gpu [%], memory.used [MiB], "
             "temperature.gpu\n")
UUIDS = ["GPU-3f1b2c4d-0a1b-4c2d-8e3f-0123456789ab", "GPU-a0b1c2d3-e4f5-0617-2839-4a5b6c7d8e9f"]


def uuid_log(n_queries: int = 6) -> list[str]:
    """Two GPUs named by index and uuid (row 3: GPU 1 of query 1, util 0 %)."""
    out = []
    for q in range(n_queries):
        for g in range(2):
            ms = 100 * q + 2 * g
            out.append(f"2025/07/27 00:34:{45 + ms // 1000:02d}.{ms % 1000:03d}, {g}, "
                       f"{UUIDS[g]}, {70 + q + 0.25 * g:.2f} W, {(q * g) % 3} %, "
                       f"{17 + g} MiB, {30 + q}\n")
    return out


UUID_MUTATIONS = {
    "clean": lambda r: r,
    "minus zero util": edit(" 0 %", " -0 %", row=2),
    "signed zero index": edit(", 0, GPU", ", -0, GPU", row=2),
    "minus zero memory, first row": edit(" 17 MiB", " -0 MiB", row=0),
    "minus zero temperature, last field": edit(", 31\n", ", -0\n", row=3),
    "dash starts a line": lambda r: r[:4] + ["-" + r[4]] + r[5:],
    "uuid changes mid-file": lambda r: r[:6] + [x.replace(UUIDS[1], UUIDS[1][:-1] + "0")
                                                for x in r[6:]],
    "uuid swapped": lambda r: r[:2] + [r[2].replace(UUIDS[0], UUIDS[1])] + r[3:],
    "uuid N/A": edit(UUIDS[1], "[N/A]", row=3),
    "uuid missing comma": edit(UUIDS[1] + ",", UUIDS[1], row=3),
}


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("name", list(UUID_MUTATIONS))
def test_uuid_log_fast_path_gives_the_general_paths_result_or_error(name, tmp_path,
                                                                     monkeypatch):
    """A log of ``index, uuid`` (a ``-`` in every UUID, 0 in the index and util columns):
    the same frame, warnings or error with the fast path as without it, and a ``-0``
    token anywhere still declines."""
    f = tmp_path / "smi.csv"
    f.write_bytes((HEAD_UUID + "".join(UUID_MUTATIONS[name](uuid_log()))).encode("utf-8"))
    assert_same_outcome(f, "UTC", monkeypatch)
    if "minus zero" in name or "negative" in name:
        assert fast_columns(f, "UTC") is None  # pandas reads "-0" as the integer 0


@pytest.mark.parametrize("piece_bytes", [None, 200])
def test_uuid_log_takes_the_fast_path_with_uuid_as_category(tmp_path, monkeypatch,
                                                            piece_bytes):
    """The dashes inside UUIDs no longer decline the fast path (issue 37): the values
    equal the reference, the UUID is read as a category (a dictionary of the distinct
    ids, also when pieces see them in another order) and the frame is the general
    path's."""
    rows = uuid_log()
    rows[4:] = [r.replace(UUIDS[0], "GPU-x").replace(UUIDS[1], UUIDS[0])
                .replace("GPU-x", UUIDS[1]) for r in rows[4:]]  # GPU 1 is written first
    rows = [r.replace(", 0, ", ", x, ").replace(", 1, ", ", 0, ").replace(", x, ", ", 1, ")
            if i >= 4 else r for i, r in enumerate(rows)]
    f = tmp_path / "smi.csv"
    f.write_text(HEAD_UUID + "".join(rows))
    if piece_bytes:
        monkeypatch.setattr(_smi_fast, "PIECE_BYTES", piece_bytes)
    got = fast_columns(f, "UTC")
    assert got is not None
    cols, _ = got
    uuid = cols["gpu_uuid"]
    assert isinstance(uuid, pa.DictionaryArray)
    assert sorted(uuid.dictionary.to_pylist()) == sorted(UUIDS)
    assert uuid.to_pylist() == [r.split(", ")[2] for r in rows]
    assert_matches_reference(cols, None, f, "UTC")
    df = assert_same_outcome(f, "UTC", monkeypatch)
    by_gpu = df.groupby("gpu_index")["gpu_uuid"].unique()
    assert [list(u) for u in by_gpu] == [[UUIDS[0]], [UUIDS[1]]]


def test_leading_minus_finds_a_sign_and_not_a_uuids_dashes():
    for text, inside, sign in [(b"-0 x", 0, True), (b"a -0", 0, True), (b"a\n-1", 0, True),
                               (b"a\r-1", 0, True), (b"GPU-1-2 4", 0, False),
                               (b"GPU-1-2 4", 2, False), (b"GPU-1-2 -4", 2, True),
                               (b"abc", 0, False)]:
        assert _smi_fast._leading_minus(b"zz" + text + b"zz", 2, 2 + len(text),
                                        inside) is sign, text


# --- dcgmi dmon: the same property for powerlab.iotools._dmon_fast -------------------------

DMON_HEAD = ("#Entity   POWER         TOTEC                 SMCLK   TMPTR    MMTMP    DVCCTR\n"
             "ID        W             mJ                            C        C\n")


def dmon_rows(n_samples: int = 4, n_gpus: int = 2) -> list[str]:
    out = []
    for q in range(n_samples):
        if q == 2:
            out.append(DMON_HEAD)  # dcgmi repeats its header every few samples
        for g in range(n_gpus):
            mmtmp = "N/A" if g == 1 else str(40 + q)
            out.append(f"GPU {g}     {70 + q + 0.5 * g:.3f}        {1284571093352 + 1000 * q}"
                       f"         {345 + q}     {33 + g}       {mmtmp}      {q}\n")
    return out


def dmon_outcome(text: str, *, fast: bool, monkeypatch):
    from powerlab.iotools import _dmon_fast, parse_dcgm_dmon
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(_dmon_fast, "fast_rows", lambda *a, **k: None)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                result = parse_dcgm_dmon(text, start="2025-07-27T00:00:00Z", delay_ms=100)
            except ParseError as exc:
                result = f"ParseError: {exc}"
    return result, [str(x.message) for x in w if issubclass(x.category, DataQualityWarning)]


DMON_MUTATIONS = {
    "clean": lambda r: r,
    "blank value": edit("1284571094352", "9223372036854775792", row=2),
    "fp64 blank": edit("71.000", "140737488355328.0", row=2),
    "nan": edit("71.000", "nan", row=2),
    "NaN": edit("71.000", "NaN", row=2),
    "inf": edit("71.000", "inf", row=2),
    "TRUE": edit("71.000", "TRUE", row=2),
    "minus zero": edit("71.000", "-0", row=2),
    "underscore": edit("71.000", "7_1", row=2),
    "bad number": edit("71.000", "7l.0", row=2),
    "bracketed": edit("71.000", "[N/A]", row=2),
    "short row": edit("      1\n", "\n", row=2),
    "long row": edit("\n", " 5\n", row=2),
    "hash in row": edit("71.000", "71#000", row=2),
    "tab separated": everywhere("     ", "\t"),
    "GPU-I row": lambda r: r[:3] + ["GPU-I 0   1 2 3 4 5 6\n"] + r[3:],
    "gpu order 1 0": lambda r: [x.replace("GPU 0", "GPU x").replace("GPU 1", "GPU 0")
                                .replace("GPU x", "GPU 1") for x in r],
    "a GPU missing once": lambda r: r[:1] + r[2:],
    "other header": lambda r: [x.replace("DVCCTR", "FBUSD") if x.startswith("#E") and i
                               else x for i, x in enumerate(r)],
    "indented rows": everywhere("GPU", "  GPU"),
    "blank lines": everywhere("\n", "\n\n"),
    "dmon stopped": lambda r: r + ["dmon was stopped\n"],
    "dmon stopped mid-output": lambda r: r[:3] + ["dmon was stopped\n"] + r[3:],
    "Inf": edit("71.000", "Inf", row=2),
    "ID in a row": edit("GPU 1", "ID 1", row=1),
    "units line alone": lambda r: r[:3] + ["ID        W             mJ\n"] + r[3:],
    "float gpu id": edit("GPU 1", "GPU 1.0", row=1),
}


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("name", list(DMON_MUTATIONS))
def test_dmon_fast_path_gives_the_line_by_line_result_or_error(name, monkeypatch):
    text = DMON_HEAD + "".join(DMON_MUTATIONS[name](dmon_rows()))
    fast, fast_warn = dmon_outcome(text, fast=True, monkeypatch=monkeypatch)
    general, general_warn = dmon_outcome(text, fast=False, monkeypatch=monkeypatch)
    if isinstance(general, str) or isinstance(fast, str):
        assert fast == general
    else:
        pd.testing.assert_frame_equal(fast, general, check_exact=True)
    assert fast_warn == general_warn


def test_dmon_header_letters_do_not_decline_and_bytes_read_alike(monkeypatch):
    """The lines that are not rows are found by their first byte (``#``, ``I``, ``d``);
    the same bytes inside a header or units line (a field ``PCITX``, a unit ``dBm``) are
    no rows: the fast path still reads the output, from text or from its bytes, and the
    frame is the line-by-line path's."""
    from powerlab.iotools import _dmon_fast, dcgm
    text = (DMON_HEAD + "".join(dmon_rows())).replace("DVCCTR", "PCITX").replace(
        "mJ   ", "mJ dBm")
    for src in (text, text.encode("ascii")):
        got = _dmon_fast.fast_rows(src, dcgm.DMON_VARIABLE_MAP, dcgm._blank_to_nan)
        assert got is not None and len(got[0]) == 8
    fast = dmon_outcome(text.encode("ascii"), fast=True, monkeypatch=monkeypatch)
    general = dmon_outcome(text, fast=False, monkeypatch=monkeypatch)
    pd.testing.assert_frame_equal(fast[0], general[0], check_exact=True)


def test_dmon_clean_output_takes_the_fast_path_with_the_reference_values():
    """Plain dmon output is read by the CSV pass; values equal a per-cell float()
    reference (mJ -> J, N/A -> NaN)."""
    from powerlab.iotools import _dmon_fast, dcgm
    rows = dmon_rows()
    got = _dmon_fast.fast_rows(DMON_HEAD + "".join(rows), dcgm.DMON_VARIABLE_MAP,
                               dcgm._blank_to_nan)
    assert got is not None
    gpus, data, sample = got
    cells = [r.split() for r in rows if r.startswith("GPU")]
    assert gpus.tolist() == [int(c[1]) for c in cells]
    assert sample.tolist() == [i // 2 for i in range(len(cells))]
    assert np.array_equal(data["power_w"], [float(c[2]) for c in cells])
    assert np.array_equal(data["energy_j"], [float(c[3]) * 1e-3 for c in cells])
    assert np.array_equal(data["temp_mem_c"],
                          [np.nan if c[6] == "N/A" else float(c[6]) for c in cells],
                          equal_nan=True)


# --- pieces: the body read in pieces on threads gives the one-piece result ---------------

def pieces_outcome(path, tz, monkeypatch, *, piece_bytes: int, workers: int):
    """The reader's outcome with the fast path cutting the body into pieces of about
    ``piece_bytes`` read on ``workers`` threads."""
    with monkeypatch.context() as m:
        m.setattr(_smi_fast, "PIECE_BYTES", piece_bytes)
        m.setattr(nvidia_smi, "_workers", lambda: workers)
        return outcome(path, tz, fast=True, monkeypatch=monkeypatch)


def assert_pieces_agree(path, tz, monkeypatch, sizes=(64, 300)):
    """Pieces of about ``sizes[0]`` bytes (a line or two) on two threads, of
    ``sizes[1]`` on one thread, the body in one piece and the general path: the same
    frame (bit for bit), warnings or error."""
    general = outcome(path, tz, fast=False, monkeypatch=monkeypatch)
    for piece_bytes, workers in ((sizes[0], 2), (sizes[1], 1), (10 ** 12, 1)):
        got = pieces_outcome(path, tz, monkeypatch, piece_bytes=piece_bytes, workers=workers)
        if isinstance(general[0], str) or isinstance(got[0], str):
            assert got[0] == general[0]
        else:
            pd.testing.assert_frame_equal(got[0], general[0], check_exact=True)
        assert got[1] == general[1]


ID_FIELDS = {"index": lambda g: str(g),
             "uuid": lambda g: f"GPU-{0x4f2a0c00 + g:08x}-0b1c-4d2e-8f30-a0b1c2d3e4f5",
             "pci.bus_id": lambda g: f"00000000:{0x18 + 16 * (7 - g):02X}:00.0"}


def synthetic_log(n_queries: int, n_gpus: int, *, ids: str | None, seed: int = 0,
                  util_from: int = 0) -> str:
    """A log as ``nvidia-smi -lms 100`` writes it (the shape of the benchmark's logs):
    rows of one query 0-2 ms apart, queries 100-101 ms apart, values with units, a GPU
    field ``ids`` (or none)."""
    rng = np.random.default_rng(seed)
    head = ("timestamp, " + (f"{ids}, " if ids else "")
            + "power.draw [W], utilization.gpu [%], memory.used [MiB]\n")
    t0 = pd.Timestamp("2025-07-27 23:59:58").value // 10 ** 6  # crosses midnight
    rows = []
    base = t0 + np.cumsum(rng.integers(100, 102, n_queries))
    for q in range(n_queries):
        t = base[q] + np.cumsum(rng.integers(0, 3, n_gpus))
        for g in range(n_gpus):
            stamp = pd.Timestamp(int(t[g]), unit="ms").strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
            cw = int(rng.integers(7000, 70000))
            rows.append(f"{stamp}, " + (f"{ID_FIELDS[ids](g)}, " if ids else "")
                        + f"{cw // 100}.{cw % 100:02d} W, "
                        f"{int(rng.integers(util_from, 101))} %, "
                        f"{int(rng.integers(17, 81000))} MiB\n")
    return head + "".join(rows)


@pytest.mark.parametrize("ids", [None, "index", "uuid", "pci.bus_id"])
def test_synthetic_logs_in_pieces_give_the_general_paths_frame(ids, tmp_path, monkeypatch):
    """Logs in the benchmark's shape (without a GPU field, with an index, a UUID or a
    PCI bus id field; across midnight): the fast path reads them, and the frame is the
    general path's bit for bit, however the body is cut and on however many threads."""
    f = tmp_path / "smi.csv"
    f.write_text(synthetic_log(150, 8, ids=ids, util_from=1))  # (no 0 %: see below)
    assert fast_columns(f, "UTC") is not None
    assert_pieces_agree(f, "UTC", monkeypatch, sizes=(2000, 9000))  # 40 and 9 pieces
    df = outcome(f, "UTC", fast=True, monkeypatch=monkeypatch)[0]
    assert len(df) == 1200 and df["timestamp"].dt.day.nunique() == 2
    assert (df.groupby("gpu_index").size() == 150).all()
    if ids == "uuid":
        assert (df.groupby("gpu_index")["gpu_uuid"].first().tolist()
                == [ID_FIELDS["uuid"](g) for g in range(8)])


def test_a_zero_in_a_log_holding_a_minus_takes_the_general_path(tmp_path, monkeypatch):
    """pandas reads the integer token ``-0`` as 0 (the general path: -0.0): a log with a
    ``-`` anywhere (here in its UUIDs) and a zero in an integer column is declined, and
    a ``-0`` there gives the general path's frame."""
    f = tmp_path / "smi.csv"
    text = synthetic_log(20, 4, ids="uuid", util_from=1)
    f.write_text(text)
    assert fast_columns(f, "UTC") is not None  # no zero: read by the fast path
    rows = text.splitlines(keepends=True)
    rows[5] = rows[5].replace(rows[5].split(", ")[3], "-0 %")
    f.write_text("".join(rows))
    assert fast_columns(f, "UTC") is None
    df = assert_same_outcome(f, "UTC", monkeypatch)
    assert np.signbit(df["util_gpu_pct"].to_numpy()).sum() == 1  # -0.0, as written
    assert_pieces_agree(f, "UTC", monkeypatch)


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutations_in_pieces_give_the_general_paths_result_or_error(name, tmp_path,
                                                                    monkeypatch):
    """Each damage or odd spelling of MUTATIONS read in pieces of about one line on two
    threads: a bad token in any piece sends the whole log to the general path, and
    identical lines on both sides of a cut are still seen."""
    f = tmp_path / "smi.csv"
    f.write_bytes((HEAD + "".join(MUTATIONS[name](by_order_log()))).encode("utf-8"))
    assert_pieces_agree(f, "UTC", monkeypatch)


REAL_TRACES = sorted((SHARED_DATA / "nvidia-smi-h100-100ms").glob("h100-traces_ckpt*.csv"))


@pytest.mark.parametrize("path", REAL_TRACES or [None], ids=lambda p: p.name if p else "none")
def test_real_traces_fast_path_gives_the_general_paths_frame(path, monkeypatch):
    """Every real 8 x H100 trace: the fast path reads it, and the frame (and warning)
    is the general path's bit for bit, in one piece and in pieces on two threads."""
    if path is None or not path.is_file():
        pytest.skip("shared real data not found")
    tz = "America/Los_Angeles"
    assert fast_columns(path, tz) is not None
    general = outcome(path, tz, fast=False, monkeypatch=monkeypatch)
    for piece_bytes, workers in ((1 << 18, 2), (10 ** 12, 1)):
        got = pieces_outcome(path, tz, monkeypatch, piece_bytes=piece_bytes, workers=workers)
        pd.testing.assert_frame_equal(got[0], general[0], check_exact=True)
        for c in got[0].columns[got[0].dtypes == "float64"]:  # NaN payloads too
            assert np.array_equal(got[0][c].to_numpy().view(np.uint64),
                                  general[0][c].to_numpy().view(np.uint64))
        assert got[1] == general[1]


@pytest.mark.parametrize("name", ["clean", "nan", "short row", "long row", "GPU-I row",
                                  "a GPU missing once", "blank lines", "dmon stopped"])
def test_dmon_pieces_give_the_line_by_line_result_or_error(name, monkeypatch):
    """dmon output with repeated headers read in pieces of about one row on two threads:
    the line-by-line path's frame, warnings or error."""
    from powerlab.iotools import _dmon_fast, dcgm
    text = DMON_HEAD + "".join(DMON_MUTATIONS[name](dmon_rows()))
    general = dmon_outcome(text, fast=False, monkeypatch=monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(_dmon_fast, "PIECE_BYTES", 40)
        m.setattr(dcgm, "available_workers", lambda limit: 2)
        got = dmon_outcome(text, fast=True, monkeypatch=monkeypatch)
    if isinstance(general[0], str) or isinstance(got[0], str):
        assert got[0] == general[0]
    else:
        pd.testing.assert_frame_equal(got[0], general[0], check_exact=True)
    assert got[1] == general[1]
    if name == "clean":  # read by the fast path, in more than one piece
        monkeypatch.setattr(_dmon_fast, "PIECE_BYTES", 40)
        assert len(_dmon_fast._pieces(text.encode(), _dmon_fast._header_lines(text)[1])) > 2
        fast = _dmon_fast.fast_rows(text, dcgm.DMON_VARIABLE_MAP, dcgm._blank_to_nan,
                                    workers=2)
        assert fast is not None and len(fast[0]) == len(got[0]) == 8


def test_dmon_random_outputs_with_blanks_and_shared_columns(monkeypatch):
    """Random dmon outputs where two fields give one column (EPLMT, PMLMT), with N/A,
    int64 and fp64 DCGM blanks: the fast path's frame is the line-by-line path's (a blank
    of the later field blanks the column; an N/A leaves the earlier field's value)."""
    rng = np.random.default_rng(5)
    fields = ["POWER", "EPLMT", "PMLMT", "TOTEC", "DVCCTR", "FBUSD"]
    for _ in range(40):
        k, n_samples = int(rng.integers(1, 4)), int(rng.integers(1, 6))
        lines = ["#Entity   " + "  ".join(fields) + "\nID\n"]
        for _q in range(n_samples):
            for g in range(k):
                cells = []
                for _f in fields:
                    r = rng.random()
                    cells.append("N/A" if r < 0.15 else "9223372036854775792" if r < 0.25
                                 else "140737488355328.0" if r < 0.3
                                 else f"{rng.integers(0, 1000)}.{rng.integers(0, 100)}")
                lines.append(f"GPU {g}  " + "  ".join(cells) + "\n")
        text = "".join(lines)
        fast, fast_warn = dmon_outcome(text, fast=True, monkeypatch=monkeypatch)
        general, general_warn = dmon_outcome(text, fast=False, monkeypatch=monkeypatch)
        pd.testing.assert_frame_equal(fast, general, check_exact=True)
        assert fast_warn == general_warn
