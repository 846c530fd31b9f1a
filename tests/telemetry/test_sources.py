"""powerlab.telemetry.sources: one resolver of telemetry inputs, used by every entry point.

Every kind (a pandas frame, a Dask frame, a store folder, a canonical .parquet file) goes
through :func:`telemetry_source` and gives the numbers the frame path gives; anything
else is one clean error naming the accepted kinds.
"""

from __future__ import annotations

import dask
import dask.dataframe as dd
import pandas as pd
import pytest

from powerlab.exceptions import PowerlabError, SchemaError
from powerlab.telemetry import TelemetrySource, engines, sources, telemetry_source
from powerlab.telemetry import aggregate as ag
from powerlab.telemetry import jobs as jobs_mod
from powerlab.telemetry.store import read_store, write_store

from .test_aggregate import CALLS, _edges, _jobs

KINDS_TEXT = ("a pandas DataFrame ('frame'), a Dask DataFrame ('dask'), a store folder "
              "('store') or a canonical telemetry .parquet file ('parquet')")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The same telemetry as each kind: frame, Dask frame, store, Parquet file."""
    root = tmp_path_factory.mktemp("sources")
    df, dups = _edges()
    write_store(df, root / "store", fsync=False)
    write_store(dups, root / "store", fsync=False)
    frame = read_store(root / "store")
    frame.to_parquet(root / "tel.parquet")
    return {"frame": frame, "dask": dd.from_pandas(frame, npartitions=3),
            "store": root / "store", "parquet": root / "tel.parquet"}


def test_each_kind_is_told_apart(inputs, tmp_path):
    for kind, data in inputs.items():
        src = telemetry_source(data)
        assert (src.kind, src.data is data) == (kind, True)
    assert telemetry_source(str(inputs["store"])).kind == "store"
    assert telemetry_source(str(inputs["parquet"])).path == inputs["parquet"]
    assert telemetry_source(tmp_path / "missing").kind == "store"   # a store read says why
    (tmp_path / "odd.parquet").mkdir()                               # a folder: a store
    assert telemetry_source(tmp_path / "odd.parquet").kind == "store"
    src = telemetry_source(inputs["frame"])
    assert telemetry_source(src) is src                              # resolved once
    assert src.path is None and src.frame() is inputs["frame"]
    assert "data=" not in repr(src)                                  # no frame in the repr


def test_a_bad_kind_is_one_error_naming_the_accepted_kinds(inputs):
    for bad in (5, None, [1, 2], pd.Series([1.0])):
        with pytest.raises(PowerlabError) as exc:
            telemetry_source(bad)
        assert str(exc.value) == (f"data must be telemetry: {KINDS_TEXT}; "
                                  f"got {type(bad).__name__}")
    with pytest.raises(PowerlabError, match=r"^telemetry must be telemetry: a store folder "
                                            r"\('store'\); got a pandas DataFrame"):
        telemetry_source(inputs["frame"], kinds=("store",), name="telemetry")
    for fn in (lambda x: ag.power_sums(x), lambda x: ag.resample_gpu(x),
               lambda x: ag.peer_stats(x), lambda x: ag.quality_masks(x, 1.0),
               lambda x: ag.hour_of_day(x, "UTC"),
               lambda x: jobs_mod.job_power(x, _jobs())):
        with pytest.raises(PowerlabError, match=r"^data must be telemetry: .* got int$"):
            fn(5)


def test_a_parquet_file_is_read_and_conformed(inputs, tmp_path):
    got = sources.read_parquet_telemetry(inputs["parquet"])
    pd.testing.assert_frame_equal(got, inputs["frame"], check_exact=True)
    with pytest.raises(PowerlabError, match="nope.parquet: no such file or folder"):
        sources.read_parquet_telemetry(tmp_path / "nope.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(PowerlabError, match="bad.parquet: cannot read as Parquet"):
        ag.power_sums(tmp_path / "bad.parquet")
    pd.DataFrame({"timestamp": [1, 2]}).to_parquet(tmp_path / "naive.parquet")
    with pytest.raises(SchemaError):
        ag.power_sums(tmp_path / "naive.parquet")
    with pytest.raises(PowerlabError, match="a store folder is not read into one pandas"):
        telemetry_source(inputs["store"]).frame()


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_kind_goes_through_the_one_resolver_and_agrees(name, inputs, monkeypatch):
    """Each entry point resolves its input with telemetry_source (once per call, what
    explains an empty result aside), and every kind gives the frame path's numbers."""
    seen = []
    real = sources.telemetry_source

    def spy(data, **kw):
        src = real(data, **kw)
        seen.append(src.kind)
        return src

    for mod in (ag, jobs_mod, engines):
        monkeypatch.setattr(mod, "telemetry_source", spy)
    fn = CALLS[name]
    with dask.config.set(scheduler="sync"):
        want = fn(inputs["frame"])
        got = {"parquet": fn(inputs["parquet"]),
               "dask": fn(inputs["dask"]),
               "store": fn(inputs["store"], engine="pandas")}
    for kind, res in got.items():
        pd.testing.assert_frame_equal(res, want, check_exact=True, obj=f"{name} of {kind}")
    assert seen[:1] == ["frame"] and {"parquet", "dask", "store"} <= set(seen), seen


def test_parquet_on_every_store_engine_entry_agrees_with_the_store(inputs):
    """A Parquet file aggregates in memory; a store on DuckDB gives the same sums."""
    for fn in (lambda x, **kw: ag.power_sums(x, "1min", by="host", **kw),
               lambda x, **kw: jobs_mod.job_power(x, _jobs(), "30s", **kw)):
        a = fn(inputs["parquet"])
        b = fn(inputs["store"], engine="duckdb")
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)


def test_aggregation_options_as_object_or_keywords(inputs):
    opts = engines.AggregationOptions(start=pd.Timestamp("2024-05-17T23:59:30Z"),
                                      hosts=["n1"], engine="pandas")
    a = ag.power_sums(inputs["store"], "30s", by="host", options=opts)
    b = ag.power_sums(inputs["store"], "30s", by="host", start=opts.start, hosts=["n1"],
                      engine="pandas")
    c = ag.power_sums(inputs["store"], "30s", by="host", options=opts, hosts=["n1"])
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    pd.testing.assert_frame_equal(a, c, check_exact=True)
    assert set(a["host"]) == {"n1"} and a["timestamp"].min() >= opts.start
    with pytest.raises(TypeError, match=r"unknown AggregationOptions option\(s\) \['stat'\]"):
        ag.power_sums(inputs["frame"], stat=opts.start)
    h = ag.hour_of_day(inputs["frame"], "UTC", options=opts)
    assert list(h["hour"]) == [0, 23] and (h["count"] > 0).all()
    with pytest.raises(PowerlabError, match="compute=False is not an option here"):
        ag.hour_of_day(inputs["frame"], "UTC", compute=False)


def test_an_empty_parquet_result_says_what_the_file_holds(inputs, tmp_path):
    node_only = inputs["frame"][inputs["frame"]["scope"] == "node"]
    node_only.to_parquet(tmp_path / "node.parquet")
    with pytest.warns(engines.EmptyResultWarning, match="no rows of scope 'gpu'.*'node' rows"):
        out = ag.power_sums(tmp_path / "node.parquet")
    assert out.empty


def test_sources_are_public_names_of_the_wing():
    import powerlab.telemetry as tel

    assert tel.telemetry_source is telemetry_source
    assert tel.TelemetrySource is TelemetrySource
    assert sources.KINDS == ("frame", "dask", "store", "parquet")
