"""Valid seed inputs the fuzzer mutates, built once per campaign into OUT/seeds/.

From the bundled data (data/), the shared reference data (../shared/data, used only when
present and never copied into the project), and small files written here from the formats
the user documentation and the tools' own output formats describe.  The telemetry store
and the canonical Parquet file are made by ``powerlab import`` itself.
"""

from __future__ import annotations

import datetime as dt
import gzip
import math
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

__all__ = ["Seed", "build_seeds"]

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent.parent / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")


@dataclass
class Seed:
    name: str  # path relative to the seeds folder
    roles: set[str]
    extra: dict = field(default_factory=dict)  # companion options, e.g. {"--tz": "UTC"}
    weight: float = 1.0


def _tiny_scenario(src: Path, dst: Path) -> None:
    d = yaml.safe_load(src.read_text())
    d["name"] = "fuzz-tiny"
    d["horizon"] = {"start_utc": "2025-06-02T12:00:00Z", "end_utc": "2025-06-02T12:30:00Z"}
    d["simulation"]["tick_s"] = 1.0
    d["hardware"]["cluster_gpus"] = 64
    d["jobs"][0].update(gpus=48, duration_s=1500)
    d["jobs"][0]["checkpoint"] = {"interval_s": 300, "duration_s": 30}
    d["jobs"][1].update(gpus=16, duration_s=1200)
    d["jobs"][1]["eval"] = {"interval_s": 300, "duration_s": 20}
    dst.write_text(yaml.safe_dump(d, sort_keys=False))


def _nvsmi_indexed(dst: Path, n_gpus=2, seconds=300) -> None:
    t0 = dt.datetime(2025, 6, 2, 12, 0, 0)
    rows = [
        "timestamp, index, uuid, name, power.draw [W], temperature.gpu, temperature.memory, "
        "clocks.sm [MHz], clocks.mem [MHz], utilization.gpu [%], power.limit [W]"
    ]
    for s in range(seconds):
        for g in range(n_gpus):
            t = t0 + dt.timedelta(seconds=s, milliseconds=3 * g)
            p = 400 + 250 * math.sin(s / 7.0 + g) + (g * 3)
            rows.append(
                f"{t:%Y/%m/%d %H:%M:%S}.{t.microsecond // 1000:03d}, {g}, "
                f"GPU-0000000{g}-aaaa-bbbb-cccc-00000000000{g}, NVIDIA H100 80GB HBM3, "
                f"{p:.2f} W, {40 + g}, {50 + g}, 1980 MHz, 2619 MHz, {90 - g} %, 700.00 W"
            )
    dst.write_text("\n".join(rows) + "\n")


def _dcgm_dmon(dst: Path, n_gpus=2, seconds=120) -> None:
    rows = [
        "#Entity   POWER    GTEMP    MMTMP    SMCLK    GPUTL",
        "ID        W        C        C        MHZ      %",
    ]
    for s in range(seconds):
        for g in range(n_gpus):
            rows.append(
                f"GPU {g}     {300 + 100 * math.sin(s / 5 + g):.3f}  {40 + g}       {50 + g}       1980     {80 + g}"
            )
    dst.write_text("\n".join(rows) + "\n")


def _dcgm_prom(dst: Path, n_gpus=2, samples=60) -> None:
    rows = [
        "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).",
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge",
    ]
    t0 = 1748865600000
    for s in range(samples):
        for g in range(n_gpus):
            lab = f'gpu="{g}",UUID="GPU-0000000{g}-aaaa",device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="h1"'
            rows.append(
                f"DCGM_FI_DEV_POWER_USAGE{{{lab}}} {300 + 10 * g + s % 7:.3f} {t0 + 1000 * s}"
            )
            rows.append(f"DCGM_FI_DEV_GPU_TEMP{{{lab}}} {40 + g} {t0 + 1000 * s}")
    dst.write_text("\n".join(rows) + "\n")


def _xid_kernel(dst: Path) -> None:
    dst.write_text(
        "[Mon Jun  2 12:01:02 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, "
        "name=python, GPU has fallen off the bus.\n"
        "[Mon Jun  2 12:05:00 2025] NVRM: Xid (PCI:0000:86:00): 48, pid=1234, "
        "name=python, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0.\n"
    )


def _targets(seeds: Path) -> None:
    (seeds / "target_tiny.csv").write_text(
        "start_utc,end_utc,cap_megawatts\n"
        "2025-06-02T12:10:00Z,2025-06-02T12:14:00Z,0.050\n"
        "2025-06-02T12:20:00Z,2025-06-02T12:22:00Z,0.045\n"
    )
    (seeds / "target_tiny_traj.csv").write_text(
        "timestamp,cap_megawatts\n2025-06-02T12:10:00Z,0.050\n2025-06-02T12:15:00Z,0.045\n"
        "2025-06-02T12:20:00Z,\n"
    )
    event = {
        "programID": "fuzz-program",
        "eventName": "fuzz-event",
        "createdDateTime": "2025-06-02T11:00:00Z",
        "intervalPeriod": {"start": "2025-06-02T12:10:00Z", "duration": "PT5M"},
        "payloadDescriptors": [{"payloadType": "IMPORT_CAPACITY_LIMIT", "units": "KW"}],
        "intervals": [
            {"id": 0, "payloads": [{"type": "IMPORT_CAPACITY_LIMIT", "values": [50]}]},
            {"id": 1, "payloads": [{"type": "IMPORT_CAPACITY_LIMIT", "values": [45]}]},
        ],
    }
    import json

    (seeds / "target_tiny_oadr.json").write_text(json.dumps(event, indent=1))
    (seeds / "sags_tiny.csv").write_text(
        "timestamp,duration_s,residual_voltage_pu\n2025-06-02T12:20:00Z,0.2,0.6\n"
        "2025-06-02T12:25:00Z,0.5,0.8\n"
    )


def _meter(seeds: Path) -> None:
    t0 = dt.datetime(2025, 5, 20, tzinfo=dt.timezone.utc)
    rows = ["timestamp,power_w"]
    for k in range(14 * 96):
        t = t0 + dt.timedelta(minutes=15 * k)
        hour = t.hour + t.minute / 60
        p = 800_000 + 200_000 * math.sin(2 * math.pi * hour / 24) + (k % 5) * 1000
        if t.date() == dt.date(2025, 6, 2) and 14 <= hour < 16:
            p -= 150_000
        rows.append(f"{t:%Y-%m-%dT%H:%M:%SZ},{p:.1f}")
    (seeds / "meter.csv").write_text("\n".join(rows) + "\n")
    (seeds / "event_meter.csv").write_text(
        "start_utc,end_utc,cap_megawatts\n2025-06-02T14:00:00Z,2025-06-02T16:00:00Z,0.7\n"
    )


def _aggregate_side(seeds: Path) -> None:
    (seeds / "jobs.csv").write_text(
        "host,gpu_index,job_id,start,end\n"
        "h1,0,1001,2025-06-02T12:00:00Z,2025-06-02T12:03:00Z\n"
        "h1,1,1002,2025-06-02T12:01:00Z,2025-06-02T12:05:00Z\n"
    )
    (seeds / "racks.csv").write_text("host,rack\nh1,r1\nnode_0,r2\n")
    (seeds / "sacct.txt").write_text(
        "JobID|JobIDRaw|JobName|Partition|State|Start|End|NNodes|NodeList|AllocTRES\n"
        "1001|1001|train|gpu|COMPLETED|2025-06-02T12:00:00|2025-06-02T12:04:00|1|h1|"
        "billing=8,cpu=64,gres/gpu=2,mem=512G,node=1\n"
        "1002|1002|eval|gpu|RUNNING|2025-06-02T12:02:00|Unknown|1|h[1-1]|gres/gpu=1,node=1\n"
    )


def build_seeds(out: Path, program: list[str], env: dict, log=print) -> list[Seed]:
    """Write the seed inputs into ``out`` and return their catalogue."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    seeds: list[Seed] = []
    data = REPO / "data"

    _tiny_scenario(data / "scenarios" / "small.yaml", out / "scen_tiny.yaml")
    seeds.append(Seed("scen_tiny.yaml", {"in_scenario", "in_source"}, weight=4))
    shutil.copy(data / "scenarios" / "small.yaml", out / "scen_small.yaml")
    seeds.append(Seed("scen_small.yaml", {"in_scenario_slow"}, weight=0.3))
    for f in sorted((data / "requirements").glob("*.yaml")):
        shutil.copy(f, out / ("req_" + f.name))
        seeds.append(Seed("req_" + f.name, {"in_requirements"}))
    _targets(out)
    seeds += [
        Seed("target_tiny.csv", {"in_target"}, weight=2),
        Seed("target_tiny_traj.csv", {"in_target"}),
        Seed("target_tiny_oadr.json", {"in_target"}, weight=2),
        Seed("sags_tiny.csv", {"in_sags"}),
    ]
    _meter(out)
    seeds += [Seed("meter.csv", {"in_meter"}), Seed("event_meter.csv", {"in_event_meter"})]
    _aggregate_side(out)
    seeds += [
        Seed("jobs.csv", {"in_jobs"}),
        Seed("racks.csv", {"in_racks"}),
        Seed("sacct.txt", {"in_sacct"}, extra={"--tz": "UTC"}),
    ]

    # MLPerf power: one B200 node (1 reading/s) and a few GPT-3 nodes (every 2 s)
    b200 = data / "mlperf-v50-b200-bert"
    (out / "b200" / "power" / "result_0").mkdir(parents=True)
    (out / "b200" / "power" / "result_1").mkdir(parents=True)
    shutil.copy(
        b200 / "power" / "result_0" / "node_0.txt.gz", out / "b200/power/result_0/node_0.txt.gz"
    )
    shutil.copy(
        b200 / "power" / "result_1" / "node_0.txt.gz", out / "b200/power/result_1/node_0.txt.gz"
    )
    shutil.copy(b200 / "result_0.txt.gz", out / "b200" / "result_0.txt.gz")
    shutil.copy(b200 / "result_1.txt.gz", out / "b200" / "result_1.txt.gz")
    seeds.append(Seed("b200/power/result_0", {"in_telemetry", "in_mlperf_dir"}, weight=2))
    seeds.append(Seed("b200/result_0.txt.gz", {"in_mllog"}))
    (out / "gpt3_power").mkdir()
    for n in (1, 2, 3):
        shutil.copy(
            data / "mlperf-gpt3-64node" / "power" / f"node_{n}.txt.gz",
            out / "gpt3_power" / f"node_{n}.txt.gz",
        )
    seeds.append(Seed("gpt3_power", {"in_telemetry", "in_mlperf_dir"}))
    # one node log as a plain text file
    (out / "node_7.txt").write_bytes(
        gzip.decompress((data / "mlperf-gpt3-64node/power/node_7.txt.gz").read_bytes())
    )
    seeds.append(Seed("node_7.txt", {"in_telemetry"}))

    _nvsmi_indexed(out / "nvsmi_idx.csv")
    seeds.append(Seed("nvsmi_idx.csv", {"in_telemetry"}, extra={"--tz": "UTC"}, weight=2))
    real = SHARED / "nvidia-smi-h100-100ms" / "h100-traces_ckpt100.csv"
    if real.is_file():  # read at run time only (no licence: never copied into the project)
        with real.open("rb") as fh:
            head = b"".join(fh.readline() for _ in range(8 * 400 + 1))
        (out / "nvsmi_h100.csv").write_bytes(head)
        seeds.append(
            Seed("nvsmi_h100.csv", {"in_telemetry"}, extra={"--tz": "UTC", "--n-gpus": "8"})
        )
    _dcgm_dmon(out / "dcgm_dmon.txt")
    seeds.append(Seed("dcgm_dmon.txt", {"in_telemetry"}, extra={"--tz": "UTC", "--host": "h2"}))
    _dcgm_prom(out / "dcgm_prom.txt")
    seeds.append(Seed("dcgm_prom.txt", {"in_telemetry"}))
    _xid_kernel(out / "xid_kernel.log")
    seeds.append(Seed("xid_kernel.log", {"in_import_only"}, extra={"--host": "h1"}, weight=0.5))
    for w in ("weather-2025-06-03.txt",):
        if (data / "weather-kmahighl4-2025" / w).is_file():
            shutil.copy(data / "weather-kmahighl4-2025" / w, out / w)
            seeds.append(Seed(w, {"in_telemetry"}, weight=0.3))

    # a store made by powerlab import itself
    store = out / "store"
    cmds = [
        [
            *program,
            "import",
            str(out / "nvsmi_idx.csv"),
            "--tz",
            "UTC",
            "--host",
            "h1",
            "--out",
            str(store),
        ],
        [*program, "import", str(out / "b200/power/result_0"), "--out", str(store)],
    ]
    for c in cmds:
        r = subprocess.run(c, capture_output=True, text=True, env=env, timeout=300)
        log(f"seed store: {' '.join(c[-6:])}: rc={r.returncode} {r.stderr.strip()[-300:]}")
    if store.is_dir():
        seeds.append(Seed("store", {"in_store", "in_telemetry", "in_source", "in_meter"}, weight=3))
        parts = sorted(
            (p for p in store.rglob("*.parquet") if "_meta" not in p.parts),
            key=lambda p: p.stat().st_size,
        )
        if parts:
            shutil.copy(parts[-1], out / "canon.parquet")
            seeds.append(Seed("canon.parquet", {"in_source", "in_telemetry"}))
    return seeds
