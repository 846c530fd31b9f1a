"""Blind validation of calibrate/backtest (issue 32): development and sealed datasets, split
by SYSTEM before any rule was chosen, scored with one rule set.

Development: every MLPerf power system in ``../shared/data`` (v4.0 SMC 64x, 8x and 1x H100;
v5.0 Lenovo 8x B200) and the v4.0 SMC 8x/1x H100 benchmarks fetched by
``data/mlperf_extra/fetch.sh`` (resnet, ssd, llama2_70b_lora, dlrm_dcnv2, unet3d).
Sealed: the v4.0 SMC 9x H100 system (unet3d, AC power), never looked at while choosing rules.

For each dataset: time split (``split_rule``) on the first ``--runs`` runs, and run to run
(calibrate on the first run, forecast the next ones).  Energy error, 1-min MAPE where at
least 10 whole minutes are scored (else refused), per dataset.  ``--part dev|sealed``.
Environment: ``POWERLAB_SHARED_DATA`` (default ../shared/data), ``POWERLAB_EXTRA_DATA``
(default ../cal-extra, the folder fetch.sh fills).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np

from powerlab.calibration.backtest import backtest_runs, backtest_split
from powerlab.calibration.calibrate import calibrate_job
from powerlab.calibration.node_split import find_system_json, gpu_model_of
from powerlab.iotools import read_mllog, read_mlperf_power

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("POWERLAB_SHARED_DATA", REPO.parent / "shared" / "data"))
EXTRA = Path(os.environ.get("POWERLAB_EXTRA_DATA", REPO.parent / "cal-extra"))
V40 = SHARED / "mlperf-training-v4.0-smc" / "smc-ac-power" / "results"
V50 = SHARED / "mlperf-v50-lenovo-8xb200"
X = EXTRA / "smc-ac-power" / "results"
DEV = {
    "v4.0 SMC 64x H100 gpt3": V40 / "64xSMC-H100-SXM-80GB" / "gpt3",
    "v4.0 SMC 8x H100 llama2_70b_lora": V40 / "8xSMC-H100-SXM-80GB" / "llama2_70b_lora",
    "v4.0 SMC 8x H100 resnet": X / "8xSMC-H100-SXM-80GB" / "resnet",
    "v4.0 SMC 8x H100 ssd": X / "8xSMC-H100-SXM-80GB" / "ssd",
    "v4.0 SMC 1x H100 bert": V40 / "1xSMC-H100-SXM-80GB" / "bert",
    "v4.0 SMC 1x H100 llama2_70b_lora": X / "1xSMC-H100-SXM-80GB" / "llama2_70b_lora",
    "v4.0 SMC 1x H100 resnet": X / "1xSMC-H100-SXM-80GB" / "resnet",
    "v4.0 SMC 1x H100 ssd": X / "1xSMC-H100-SXM-80GB" / "ssd",
    "v4.0 SMC 1x H100 dlrm_dcnv2": X / "1xSMC-H100-SXM-80GB" / "dlrm_dcnv2",
    "v4.0 SMC 1x H100 unet3d": X / "1xSMC-H100-SXM-80GB" / "unet3d",
    "v5.0 Lenovo 1x B200 bert": V50 / "bert",
    "v5.0 Lenovo 1x B200 llama2_70b_lora": V50 / "llama2_70b_lora",
    "v5.0 Lenovo 1x B200 retinanet": V50 / "retinanet",
    "v5.0 Lenovo 1x B200 stable_diffusion": V50 / "stable_diffusion",
}
SEALED = {
    "v4.0 SMC 9x H100 unet3d (AC)": EXTRA / "sealed" / "smc-ac-power" / "results"
    / "9xSMC-H100-SXM-80GB" / "unet3d",
}


def runs_of(root: Path, n: int) -> list:
    out = []
    for pdir in sorted((root / "power").iterdir(), key=lambda p: p.name):
        logs = sorted(root.glob(pdir.name + ".txt*"))
        if logs:
            out.append((pdir.name, pdir, logs[0]))
        if len(out) >= n:
            break
    return out


def one(name, root, n):
    runs = [(nm, read_mlperf_power(p), read_mllog(lg)) for nm, p, lg in runs_of(root, n)]
    sj = find_system_json(root / "power")
    model = gpu_model_of(sj)[0] if sj else None
    fails, e_split, m_split, mins = [], [], [], []
    for nm, p, e in runs:
        try:
            calibrate_job(p, events=e, gpu_model=model).to_yaml()
            r = backtest_split(p, e)
            m = r.metrics.set_index("metric")
            e_split.append(m.loc["energy_j", "error_pct"])
            m_split.append(m.loc["mape_1min_pct", "forecast"])
            mins.append(m.loc["scored_minutes", "forecast"])
        except Exception as exc:   # noqa: BLE001 - counted and printed
            fails.append(f"{nm}: {type(exc).__name__}: {exc}"[:200])
    r2r_e, r2r_m = [], []
    if len(runs) > 1:
        try:
            rr = backtest_runs(runs[:1], runs[1:])
            mm = rr.metrics
            r2r_e = mm.loc[mm["metric"] == "energy_j", "error_pct"].tolist()
            r2r_m = mm.loc[mm["metric"] == "mape_1min_pct", "forecast"].tolist()
        except Exception as exc:   # noqa: BLE001
            fails.append(f"run to run: {type(exc).__name__}: {exc}"[:200])
    fm = [v for v in m_split if np.isfinite(v)]
    rm = [v for v in r2r_m if np.isfinite(v)]
    print(f"| {name} | {len(runs)} | {len(fails)} | "
          f"{max(map(abs, e_split)) if e_split else float('nan'):.2f} % | "
          + (f"{max(fm):.2f} % ({len(fm)} runs >= 10 min)" if fm else
             f"refused (<= {int(max(mins)) if mins else 0} min)")
          + f" | {max(map(abs, r2r_e)) if r2r_e else float('nan'):.2f} % | "
          + (f"{max(rm):.2f} % ({len(rm)})" if rm else "refused / none") + " |",
          flush=True)
    for f in fails:
        print(f"    FAIL {f}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("dev", "sealed"), default="dev")
    ap.add_argument("--runs", type=int, default=4)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    sets = DEV if args.part == "dev" else SEALED
    print("| dataset | runs | failures | time split energy, max abs | time split 1-min MAPE, "
          "max | run to run energy, max abs | run to run 1-min MAPE, max |")
    print("|---|---|---|---|---|---|---|")
    for name, root in sets.items():
        if (root / "power").is_dir():
            one(name, root, args.runs)
        else:
            print(f"| {name} | absent | | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
