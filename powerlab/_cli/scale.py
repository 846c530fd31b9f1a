"""``powerlab scale``: from a calibrated job to a site scenario."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..outputs import add_force, guard_outputs


def _shares(text: str) -> tuple:
    try:
        vals = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected shares like 0.75,0.25, got {text!r}"
                                         ) from None
    return vals


def _sag(text: str) -> tuple:
    """``PU:SECONDS@HOURS`` (e.g. ``0.5:1@12``: 0.5 pu for 1 s, 12 h into the horizon)."""
    try:
        head, _, at = text.partition("@")
        pu, dur = head.split(":")
        return float(pu), float(dur), float(at or 0.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected PU:SECONDS@HOURS (e.g. 0.5:1@12), got {text!r}") from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scale",
        help="scale a calibrated job to a site scenario (N GPUs, job mix, staggering, "
             "failures, PUE, a disturbance)",
        description="Write the site scenario of a job calibrated by 'powerlab calibrate': "
                    "the job's physics on N GPUs over a horizon, split into jobs, with "
                    "staggered starts, checkpoints, failures, a facility PUE and "
                    "optionally one voltage sag. Every value scaling sets is commented "
                    "with its source or marked as an assumption (docs/journey.md).")
    p.add_argument("scenario", type=Path, help="calibrated scenario YAML (powerlab calibrate)")
    p.add_argument("--gpus", type=int, required=True, help="GPUs training on the site")
    p.add_argument("--out", type=Path, required=True, help="site scenario YAML to write")
    p.add_argument("--gpu-model", help="GPU model, required where the calibrated scenario "
                                       "does not name it (e.g. B200, H100-SXM)")
    p.add_argument("--job-mix", type=_shares, default=(1.0,),
                   help="shares of the GPUs per job, e.g. 0.75,0.25 (default: one job)")
    p.add_argument("--stagger-s", type=float, default=0.0,
                   help="delay between consecutive jobs' starts [s] (default 0)")
    p.add_argument("--horizon-h", type=float, default=24.0, help="forecast length [h] "
                                                                 "(default 24)")
    p.add_argument("--start", help="horizon start, ISO 8601 UTC (default: midnight of the "
                                   "recorded day)")
    p.add_argument("--tz", default="UTC", help="site time zone (IANA name; default UTC)")
    p.add_argument("--pue", type=float, default=1.2, help="facility PUE (default 1.2, an "
                                                          "assumption)")
    p.add_argument("--failure-rate-per-gpu-h", type=float, default=None,
                   help="interruptions per GPU-hour (default: Llama 3 405B's 419 in 54 "
                        "days on 16,384 GPUs, 1.97e-5)")
    p.add_argument("--restart-s", type=float, default=900.0,
                   help="time from an interruption to training again [s] (default 900)")
    p.add_argument("--checkpoint-interval-s", type=float, default=1800.0,
                   help="checkpoint interval [s] (default 1800; 0: none)")
    p.add_argument("--checkpoint-duration-s", type=float, default=60.0,
                   help="checkpoint length [s] (default 60)")
    p.add_argument("--sag", type=_sag, default=None, metavar="PU:SECONDS@HOURS",
                   help="one voltage sag, e.g. 0.5:1@12 (0.5 pu for 1 s, 12 h into the "
                        "horizon)")
    add_force(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..outputs import atomic_write
    from ..site.scaling import LLAMA3_FAILURE_RATE_PER_GPU_H, SiteAssumptions, scale_scenario_file

    guard_outputs([args.out], [args.scenario], force=args.force)
    a = SiteAssumptions(
        gpus=args.gpus, job_mix=args.job_mix, stagger_s=args.stagger_s,
        horizon_h=args.horizon_h, start_utc=args.start, tz=args.tz, pue=args.pue,
        failure_rate_per_gpu_h=(LLAMA3_FAILURE_RATE_PER_GPU_H
                                if args.failure_rate_per_gpu_h is None
                                else args.failure_rate_per_gpu_h),
        restart_s=args.restart_s, checkpoint_interval_s=args.checkpoint_interval_s,
        checkpoint_duration_s=args.checkpoint_duration_s, sag=args.sag,
        gpu_model=args.gpu_model)
    text, spec = scale_scenario_file(args.scenario, a)
    atomic_write(args.out, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    jobs = spec["jobs"]
    sizes = ", ".join(f"{j['gpus']:,}" for j in jobs)
    print(f"site scenario: {a.gpus:,} GPUs of {spec['hardware'].get('gpu_model')} in "
          f"{len(jobs)} job(s) ({sizes}), "
          f"{a.horizon_h:g} h from {spec['horizon']['start_utc']}, PUE {a.pue:g}"
          + (f", sag {a.sag[0]:g} pu for {a.sag[1]:g} s" if a.sag else ""))
    print(f"wrote {args.out}")
    return 0
