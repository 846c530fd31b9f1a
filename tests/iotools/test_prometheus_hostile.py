"""read_prometheus against a hostile or odd server (issue 24): a local fake Prometheus on
127.0.0.1 answers what a test tells it.  One deadline per request (a server dripping a
byte at a time cannot hold it), a size cap, no redirect to another scheme, impossible
power values masked and counted, series without a gpu label and a second series for one
GPU reported, never silently dropped or collapsed."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from powerlab.exceptions import DataQualityWarning, PowerlabError
from powerlab.iotools import read_prometheus

from ..support.fakeprom import FakeProm

pytestmark = pytest.mark.bad_input("readers")

T0 = 1_780_000_000
START, END = "2026-05-28T20:26:40Z", "2026-05-28T20:27:10Z"   # T0 .. T0 + 30 s


def _matrix(series):
    return json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                     "result": series}}).encode()


def _one(gpu="0", values=None, **labels):
    vals = values or [[T0 + 15 * i, "300"] for i in range(3)]
    return {"metric": {"Hostname": "n1", "UUID": f"GPU-{gpu}", "gpu": gpu, **labels},
            "values": vals}


@pytest.fixture
def fake():
    made = []

    def make(behave):
        f = FakeProm(behave)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


def _answer(body: bytes, status: int = 200, headers=()):
    def behave(h):
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return behave


def _power(series):
    """Only the power metric answers; the others are empty matrices."""
    def behave(h):
        body = _matrix(series if "POWER_USAGE_INSTANT" in h.path else [])
        _answer(body)(h)
    return behave


def _read(url, **kw):
    return read_prometheus(url, START, END, step="15s", **kw)


@pytest.mark.slow
def test_a_server_dripping_a_byte_every_2_s_cannot_hold_the_deadline(fake):
    def drip(h):
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        for _ in range(30):                      # bounded: 60 s at most
            try:
                h.wfile.write(b" ")
                h.wfile.flush()
            except OSError:
                return
            time.sleep(2)

    f = fake(drip)
    t = time.monotonic()
    with pytest.raises(PowerlabError, match="did not answer within 3 s"):
        _read(f.url, timeout_s=3, metrics=["DCGM_FI_DEV_POWER_USAGE_INSTANT"])
    assert time.monotonic() - t < 20            # the 5-s timeout held for 120 s before


def test_an_answer_over_the_size_cap_is_refused(fake):
    f = fake(_answer(b"x" * 100_000))
    with pytest.raises(PowerlabError, match="max_response_bytes"):
        _read(f.url, max_response_bytes=50_000, metrics=["DCGM_FI_DEV_POWER_USAGE_INSTANT"])

    def no_length(h):                            # no Content-Length: counted while read
        h.send_response(200)
        h.end_headers()
        h.wfile.write(b"y" * 100_000)
        h.close_connection = True

    f2 = fake(no_length)
    with pytest.raises(PowerlabError, match="more than 50,000 bytes"):
        _read(f2.url, max_response_bytes=50_000,
              metrics=["DCGM_FI_DEV_POWER_USAGE_INSTANT"])


@pytest.mark.parametrize("location", ["file:///etc/passwd", "ftp://127.0.0.1/x",
                                      "https://127.0.0.1:1/x"])
def test_no_redirect_to_another_scheme(fake, location):
    f = fake(_answer(b"", 302, [("Location", location)]))
    with pytest.raises(PowerlabError, match="another scheme"):
        _read(f.url, metrics=["DCGM_FI_DEV_POWER_USAGE_INSTANT"])


def test_a_same_scheme_redirect_is_followed_a_few_times_only(fake):
    f = fake(_answer(b"", 302, [("Location", "/api/v1/query_range?again=1")]))
    with pytest.raises(PowerlabError, match="more than 3 redirects"):
        _read(f.url, metrics=["DCGM_FI_DEV_POWER_USAGE_INSTANT"])


def test_impossible_power_is_masked_and_counted(fake):
    vals = [[T0, "+Inf"], [T0 + 15, "-20"], [T0 + 30, "1e308"]]
    f = fake(_power([_one("0", vals), _one("1")]))
    with pytest.warns(DataQualityWarning, match="3 value"):
        df = _read(f.url, metrics=["DCGM_FI_DEV_POWER_USAGE_INSTANT"])
    g0 = df[df["gpu_index"] == 0]["power_w"]
    assert len(g0) == 3 and g0.isna().all()
    assert (df[df["gpu_index"] == 1]["power_w"] == 300.0).all()


def test_series_without_gpu_and_duplicate_series_are_reported(fake):
    no_gpu = _one("0")
    del no_gpu["metric"]["gpu"]
    dup = _one("1", [[T0 + 15 * i, "999"] for i in range(3)], job="other")
    f = fake(_power([_one("1"), no_gpu, dup]))
    with pytest.warns(DataQualityWarning) as rec:
        df = _read(f.url, metrics=["DCGM_FI_DEV_POWER_USAGE_INSTANT"])
    msg = " ".join(str(w.message) for w in rec)
    assert "1 series without a numeric 'gpu' label" in msg
    assert "1 second series for one host, GPU and metric" in msg
    assert np.array_equal(df["power_w"].to_numpy(), [300.0] * 3)   # the first, not 999


@pytest.mark.parametrize("body", [
    b'{"status": "success", "data": {"resultType": "matrix", "result": "x"}}',
    b'{"status": "success", "data": "x"}',
    b"[" * 100_000,
    b'{"status": ["error"], "error": {"a": 1}}',
])
def test_malformed_answers_are_one_powerlab_error(fake, body):
    f = fake(_answer(body))
    with pytest.raises(PowerlabError):
        _read(f.url, metrics=["DCGM_FI_DEV_POWER_USAGE_INSTANT"])


def test_malformed_series_are_counted_not_a_traceback(fake):
    f = fake(_power([{"metric": "x", "values": []}, {"metric": {"gpu": "0"},
                                                      "values": [["t", "v"]]},
                     {"metric": {"gpu": "0"}, "values": [[1e300, "1"]]}]))
    with pytest.warns(DataQualityWarning, match="3 series not in Prometheus' matrix shape"):
        df = _read(f.url, metrics=["DCGM_FI_DEV_POWER_USAGE_INSTANT"])
    assert len(df) == 0
