"""``powerlab collect``: record GPU telemetry from NVML into a Parquet store."""

from __future__ import annotations

import argparse

from . import _args

HELP = "record GPU power, energy, clocks, temperatures and throttle reasons via NVML"


def _gpus(text: str) -> list[int]:
    try:
        out = [int(t) for t in text.split(",") if t.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated GPU indices such as 0,1; got {text!r}") from None
    if not out or any(i < 0 for i in out):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated GPU indices such as 0,1; got {text!r}")
    return out


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive, finite number of seconds, "
                                         f"got {text!r}")
    return v


def _signal_interval(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected GROUP=SECONDS such as temperature=1, "
                                         f"got {text!r}")
    return name.strip(), _positive(value)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "collect", help=HELP,
        description=HELP + ". Samples are flushed to the store as new Parquet files every "
                           "--flush-interval-s; SIGINT/SIGTERM flush and exit cleanly.")
    p.add_argument("--out", required=True, metavar="STORE", help="store folder")
    p.add_argument("--interval-s", type=_positive, default=0.1, metavar="S",
                   help="sampling interval [s] (default 0.1)")
    p.add_argument("--duration-s", type=_positive, default=None, metavar="S",
                   help="stop after this many seconds (default: until interrupted)")
    p.add_argument("--gpus", type=_gpus, default=None, metavar="0,1,...",
                   help="NVML indices of the GPUs to sample (default: all)")
    p.add_argument("--flush-interval-s", type=_positive, default=10.0, metavar="S",
                   help="write buffered samples every S seconds (default 10)")
    p.add_argument("--max-buffer-s", type=_positive, default=None, metavar="S",
                   help="most seconds of samples held while the store is behind; newer "
                        "samples are dropped and counted beyond it (default: max(60, 4 x "
                        "flush interval))")
    p.add_argument("--hang-timeout-s", type=_positive, default=None, metavar="S",
                   help="an NVML call taking longer is treated as hung: that GPU is taken "
                        "out and retried, the others keep their rate (default: max(1, 5 x "
                        "interval))")
    p.add_argument("--signal-interval-s", type=_signal_interval, action="append",
                   default=[], metavar="GROUP=S",
                   help="slower interval for a signal group (power, temperature, clocks, "
                        "utilization, power_limit), e.g. temperature=1; repeatable")
    p.add_argument("--host", type=_args.host, default=None, help="host name to record (default: this host)")
    p.add_argument("--prometheus-port", type=int, default=None, metavar="P",
                   help="serve /metrics with DCGM-compatible names on port P")
    p.add_argument("--metrics-address", default="127.0.0.1", metavar="ADDR",
                   help="address /metrics binds to (default 127.0.0.1, this host only; "
                        "0.0.0.0 serves every interface)")
    p.set_defaults(func=handle)


def handle(args) -> int:
    import signal
    import sys

    from ..collect.collector import Collector
    from ..exceptions import PowerlabError

    if any(not isinstance(v, tuple) for v in args.signal_interval_s):
        raise PowerlabError("--signal-interval-s: expected GROUP=SECONDS such as "
                            "temperature=1")
    collector = Collector(
        args.out, interval_s=args.interval_s, gpus=args.gpus,
        flush_interval_s=args.flush_interval_s, max_buffer_s=args.max_buffer_s,
        hang_timeout_s=args.hang_timeout_s,
        signal_intervals_s=dict(args.signal_interval_s), host=args.host,
        prometheus_port=args.prometheus_port, prometheus_addr=args.metrics_address)
    received: list[str] = []

    def on_signal(signum, frame):
        received.append(signal.Signals(signum).name)
        collector.request_stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        collector.start()
        names = ", ".join(f"{i}: {d.info.name}" for i, d in sorted(collector.devices.items()))
        metrics = (f"; /metrics on port {collector.metrics_port}"
                   if collector.metrics_port is not None else "")
        print(f"powerlab collect: sampling {len(collector.devices)} GPU(s) [{names}] every "
              f"{args.interval_s:g} s into {args.out}{metrics}; Ctrl-C or SIGTERM to stop",
              file=sys.stderr, flush=True)
        report = collector.run(args.duration_s)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if received:
        print(f"powerlab collect: stopped by {received[0]}; buffered samples flushed",
              file=sys.stderr)
    print(report.summary())
    return 0

