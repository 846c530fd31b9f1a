"""``powerlab calibrate``: fit a job's power profile from its telemetry and write it as a
scenario that ``powerlab forecast`` runs unchanged."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit a job power profile from telemetry and write it as a scenario YAML",
        description="Fit a job's power profile (levels with their uncertainty, step period, "
                    "duty cycle, step dip, evaluations, start-up) from its power telemetry "
                    "(any supported format, MLPerf node logs, or a store) and, optionally, "
                    "its MLPerf training log; write a scenario with the job and the "
                    "hardware block it implies, each number commented with its source. "
                    "'powerlab forecast' runs the file unchanged. Prints what the data "
                    "cannot tell.",
    )
    p.add_argument("power", nargs="+", type=Path,
                   help="power telemetry: files, folders of MLPerf node logs, or a store")
    p.add_argument("--events", type=Path, help="MLPerf training log (result_*.txt[.gz])")
    p.add_argument("--start", help="calibration window start (UTC, ISO 8601)")
    p.add_argument("--end", help="calibration window end (UTC, ISO 8601)")
    p.add_argument("--gpus-per-node", type=int, default=8,
                   help="GPUs per node for node-level telemetry (default 8)")
    p.add_argument("--meter-interval", type=float,
                   help="interval of the readings [s] (default: detected per file)")
    p.add_argument("--gpu-model",
                   help="GPU model (e.g. H100-SXM5-80GB, B200-SXM-180GB); default: from the "
                        "MLPerf system description found beside the recording "
                        "(systems/<system>.json) or given with --system. It selects the "
                        "hardware prior of the GPU / non-GPU split of node power")
    p.add_argument("--system", type=Path,
                   help="MLPerf system description (JSON) of the recording's system")
    p.add_argument("--name", default="calibrated", help="job name in the scenario")
    p.add_argument("--tz", help="time zone of zone-less timestamps in the sources")
    p.add_argument("--out", type=Path, required=True, help="scenario YAML to write")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..calibration.calibrate import calibrate_job
    from ..exceptions import PowerlabError
    from ..site.scenario import parse_scenario
    from ..telemetry.timeutil import to_utc
    from ._recording import read_events, read_power

    if args.out.suffix.lower() not in (".yaml", ".yml"):
        raise PowerlabError(f"--out {args.out}: the scenario is a YAML file; name it "
                            "'*.yaml'")
    if not args.out.parent.is_dir():
        raise PowerlabError(f"--out {args.out}: folder {args.out.parent} does not exist")
    if args.gpus_per_node < 1:
        raise PowerlabError(f"--gpus-per-node must be >= 1, got {args.gpus_per_node}")
    start, end = (to_utc(args.start, what="--start", optional=True),
                  to_utc(args.end, what="--end", optional=True))
    if args.meter_interval is not None and not args.meter_interval > 0:
        raise PowerlabError(f"--meter-interval must be > 0 seconds, got {args.meter_interval}")
    from .._progress import CommandProgress
    from ._estimates import reading

    with CommandProgress("calibrate", *reading("fit a job to", args.power)) as bar:
        bar.phase("reading the power recording")
        power = read_power(args.power, tz=args.tz)
        events = read_events(args.events) if args.events else None
        src = ", ".join(str(p) for p in args.power)
        model, model_src = _gpu_model(args)
        bar.phase(f"fitting {len(power):,} readings")
        cal = calibrate_job(power, events=events, start=start,
                            end=end, meter_interval_s=args.meter_interval,
                            gpus_per_node=args.gpus_per_node, source=src,
                            events_source=str(args.events) if args.events else None,
                            gpu_model=model, gpu_model_source=model_src)
    text = cal.to_yaml(name=args.name, source=src + (f" with events {args.events}"
                                                      if args.events else ""))
    parse_scenario(text, path=args.out)  # what forecast will read must parse
    args.out.write_text(text, encoding="utf-8")
    print(cal.summary())
    print(f"wrote {args.out}")
    return 0


def _gpu_model(args):
    """(model, source): --gpu-model, else --system, else a system description found
    beside the recording; (None, why) when there is none."""
    from ..calibration.node_split import find_system_json, gpu_model_of
    from ..exceptions import PowerlabError

    if args.gpu_model:
        return args.gpu_model, "given: --gpu-model"
    path = args.system
    if path is not None and not path.is_file():
        raise PowerlabError(f"--system {path}: no such file")
    path = path or next((f for f in map(find_system_json, args.power) if f), None)
    if path is None:
        return None, "not given (no --gpu-model, no system description found)"
    model, _, why = gpu_model_of(path)
    return model, why
