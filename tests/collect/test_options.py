"""powerlab.collect.options: a collector's options as one checked object, and the keyword
calls written before it."""

from __future__ import annotations

import math
import socket

import pytest

from powerlab.collect import CollectorOptions
from powerlab.collect.collector import Collector
from powerlab.exceptions import PowerlabError


def test_defaults_exist_once_and_derived_values_follow_them():
    o = CollectorOptions()
    assert (o.interval_s, o.flush_interval_s, o.window_s) == (0.1, 10.0, 60.0)
    assert o.hang_s == 1.0                      # max(1 s, 5 intervals)
    assert o.buffer_s == 60.0                   # max(60 s, 4 flush intervals)
    assert CollectorOptions(interval_s=0.5).hang_s == 2.5
    assert CollectorOptions(flush_interval_s=20).buffer_s == 80.0
    assert CollectorOptions(hang_timeout_s=3, max_buffer_s=15).hang_s == 3.0
    assert CollectorOptions(interval_s=0.1, signal_intervals_s={"temperature": 1.0}
                            ).every() == {"power": 1, "temperature": 10, "clocks": 1,
                                          "utilization": 1, "power_limit": 1}


def test_options_object_and_keywords_give_the_same_collector():
    opts = CollectorOptions(interval_s=0.02, flush_interval_s=0.5, host="node-a",
                            retry_backoff_s=(1, 4), gpus=(1, 0))
    by_object = Collector("store", options=opts)
    by_keywords = Collector("store", interval_s=0.02, flush_interval_s=0.5, host="node-a",
                            retry_backoff_s=(1, 4), gpus=(1, 0))
    for c in (by_object, by_keywords):
        assert c.options == opts
        assert (c.interval_s, c.flush_interval_s, c.host, c.gpus) == (0.02, 0.5, "node-a",
                                                                      [1, 0])
        assert c.retry_backoff_s == (1.0, 4.0) and isinstance(c.retry_backoff_s[0], float)
        assert (c.hang_timeout_s, c.max_buffer_s) == (1.0, 60.0)
    # keywords replace the object's fields, the rest is kept
    c = Collector(None, options=opts, interval_s=0.05)
    assert (c.interval_s, c.host, c.out) == (0.05, "node-a", None)
    assert Collector(None).host == socket.gethostname()


def test_an_unknown_option_names_the_known_ones():
    with pytest.raises(TypeError, match=r"unknown CollectorOptions option\(s\) \['intervall_s'\]"
                                        ".*interval_s"):
        Collector(None, intervall_s=0.1)
    with pytest.raises(TypeError, match="options must be a CollectorOptions"):
        Collector(None, options={"interval_s": 0.1})


@pytest.mark.parametrize("kw, message", [
    ({"interval_s": 0}, "interval_s must be a finite number > 0 s, got 0"),
    ({"flush_interval_s": -1}, "flush_interval_s must be a finite number > 0 s, got -1"),
    ({"window_s": math.inf}, "window_s must be a finite number > 0 s, got inf"),
    ({"gpus": [-1]}, r"gpus must be distinct GPU indices >= 0, got \[-1\]"),
    ({"prometheus_port": -5}, r"prometheus_port must be 0..65535 \(0: any free port\), got -5"),
    ({"hang_timeout_s": -1}, "hang_timeout_s must be a finite number > 0 s, got -1"),
    ({"max_buffer_s": 5}, r"max_buffer_s must be a finite number of seconds >= "
                          "flush_interval_s = 10.0 s, got 5"),
    ({"retry_backoff_s": (2, 1)}, r"retry_backoff_s must be \(first, largest\) with "
                                  r"0 < first <= largest, got \(2, 1\)"),
])
def test_each_bad_value_is_refused_naming_its_option(kw, message):
    with pytest.raises(PowerlabError, match=message):
        CollectorOptions(**kw)
    with pytest.raises(PowerlabError, match=message):
        Collector(None, **kw)


def test_the_first_bad_option_in_the_documented_order_is_named():
    # interval before window before gpus before the hang timeout before signal groups
    with pytest.raises(PowerlabError, match="^interval_s"):
        CollectorOptions(interval_s=0, window_s=0, gpus=[0, 0])
    with pytest.raises(PowerlabError, match="^window_s"):
        CollectorOptions(window_s=0, gpus=[0, 0], hang_timeout_s=0)
    with pytest.raises(PowerlabError, match="^hang_timeout_s"):
        CollectorOptions(hang_timeout_s=0, signal_intervals_s={"fan": 1.0})
