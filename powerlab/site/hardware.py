"""The cluster's hardware: GPU power levels and node composition, from a scenario's
``hardware:`` section.

Layout of the section (all optional)::

    hardware: {gpu_model, gpu_idle_w, gpu_compute_w, gpu_comm_w, gpu_tdp_w,
               gpus_per_node, node_overhead_w, cluster_gpus,
               gpu_rise_time_constant_s, gpu_fall_time_constant_s}

The power levels are the defaults of every job's ``power:`` levels
(:func:`powerlab.site.scenario.parse_scenario`); the time constants are those of the GPU
transients (:mod:`powerlab.site.transients`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..limits.yamlspec import Section

__all__ = ["Hardware", "parse_hardware"]

#: Bounds that catch typos (a unit slip of 1000x), far above any real cluster:
MAX_GPUS = 10_000_000          # the largest announced sites hold ~1M GPUs
MAX_GPU_W = 5000.0              # one accelerator package (B200/GB200: 1.0-1.2 kW)
MAX_GPUS_PER_NODE = 1024        # a "node" may be a whole rack (NVL72: 72 GPUs)
MAX_NODE_OVERHEAD_W = 200_000.0  # non-GPU power of one node or rack (NVL72 rack ~ 20-30 kW)


@dataclass(frozen=True)
class Hardware:
    """GPU power levels and node composition.

    Attributes
    ----------
    gpu_model : str
        Name, for reports.
    gpu_idle_w, gpu_compute_w, gpu_comm_w, gpu_tdp_w : float
        Per-GPU power when idle, in the compute part of a step, waiting on
        communication, and the thermal design power [W].
    gpus_per_node : int
        GPUs in one node.
    node_overhead_w : float
        Node power besides its GPUs (CPUs, NICs, fans, PSU losses) [W].
    cluster_gpus : int
        GPUs in the cluster; those in no job draw idle power (default: jobs' sum).
    gpu_rise_time_constant_s, gpu_fall_time_constant_s : float
        First-order time constants of a GPU's power rising and falling between levels
        (0: instantaneous steps); defaults and sources in
        :mod:`powerlab.site.transients` [s].
    """

    gpu_model: str = "H100-SXM"
    gpu_idle_w: float = 75.0
    gpu_compute_w: float = 650.0
    gpu_comm_w: float = 250.0
    gpu_tdp_w: float = 700.0
    gpus_per_node: int = 8
    node_overhead_w: float = 2500.0
    cluster_gpus: int = 0
    gpu_rise_time_constant_s: float = 0.03
    gpu_fall_time_constant_s: float = 0.03

    @property
    def nodes(self) -> int:
        """Number of nodes powered [-]."""
        return math.ceil(self.cluster_gpus / self.gpus_per_node)


def parse_hardware(s: Section) -> Hardware:
    """Read a scenario's ``hardware:`` section; ``cluster_gpus`` stays 0 when not given
    (the scenario sets it to the jobs' GPUs).  Errors name the key path
    (``hardware.gpu_compute_w``)."""
    hw = {
        "gpu_model": s.string("gpu_model", "H100-SXM"),
        "gpu_idle_w": s.number("gpu_idle_w", 75.0),
        "gpu_compute_w": s.number("gpu_compute_w", 650.0),
        "gpu_comm_w": s.number("gpu_comm_w", 250.0),
        "gpu_tdp_w": s.number("gpu_tdp_w", 700.0, lo=0.0, lo_open=True, hi=MAX_GPU_W),
        "gpus_per_node": s.integer("gpus_per_node", 8, hi=MAX_GPUS_PER_NODE),
        "node_overhead_w": s.number("node_overhead_w", 2500.0, hi=MAX_NODE_OVERHEAD_W),
        "cluster_gpus": s.integer("cluster_gpus", 0, lo=0, hi=MAX_GPUS),
        "gpu_rise_time_constant_s": s.number("gpu_rise_time_constant_s", 0.03, lo=0.0,
                                             hi=10.0),
        "gpu_fall_time_constant_s": s.number("gpu_fall_time_constant_s", 0.03, lo=0.0,
                                             hi=10.0),
    }
    for k in ("gpu_idle_w", "gpu_compute_w", "gpu_comm_w"):
        if hw[k] > 1.5 * hw["gpu_tdp_w"]:
            raise s.error(k, f"{hw[k]:g} W is above 1.5 x gpu_tdp_w ({hw['gpu_tdp_w']:g} W)")
    s.finish()
    return Hardware(**hw)
