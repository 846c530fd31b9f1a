"""Transfer honestly: what a node-hazard model fitted on one fleet carries to another job,
and what it assumes.

:func:`transfer_table` lists, for a plan made from a fit, every parameter the plan uses,
its value, and whether it was **fitted** on the source fleet (and so carries that fleet's
hardware, age, operations and fault taxonomy over to the planned job), **given** by the
planner, or **assumed** (a default nobody measured).
"""

from __future__ import annotations

import pandas as pd

__all__ = ["transfer_table"]


def transfer_table(params: dict, plan) -> pd.DataFrame:
    """Parameters of a goodput plan and where each comes from.

    Parameters
    ----------
    params : dict
        :meth:`powerlab.reliability.faultfit.FaultFit.params`.
    plan : powerlab.reliability.goodput.GoodputPlan

    Returns
    -------
    pandas.DataFrame
        ``parameter, value, unit, status, note`` with status ``fitted``, ``given`` or
        ``assumed``.
    """
    src = params.get("source", "the fitted fleet")
    fitted = f"fitted on {src}; carried over as if the planned fleet were alike"
    rows = [
        ("rate_per_node_day", params["rate_per_node_day"], "1/(node d)", "fitted",
         f"{fitted} (hardware generation, age, operations, what counts as a fault)"),
        ("planned_rate_per_node_day", params.get("planned_rate_per_node_day", 0.0),
         "1/(node d)", "fitted", fitted + "; operators' practice differs most here"),
        ("theta", params.get("theta", 0.0), "-", "fitted",
         fitted + "; lemon nodes assumed as common and as persistent"),
        ("repair_model", f"{params['repair_model']} (mean {params['repair_mean_d']:.2f} d)",
         "d", "fitted", fitted + "; repair logistics (parts, staff) differ by site"),
        ("gpus_per_node", plan.gpus_per_node, "-",
         "given" if plan.gpus_per_node != 8 else "assumed",
         "a fault takes out one node; the source's GPUs per node are not in its record"),
        ("all_classes_interrupt", True, "-", "assumed",
         "every unexpected node fault interrupts a job on that node (none is masked)"),
        ("checkpoint_s", plan.checkpoint_s, "s", "given", "planner's input"),
        ("restart_s", plan.restart_s, "s", "given",
         "planner's input (detection + restart, with a spare at hand)"),
        ("spares", "fitted pool (P 0.99)" if plan.spares is None else plan.spares, "-",
         "assumed" if plan.spares is None else "given",
         "spare nodes held for the job"),
        ("repair_crews", "unlimited" if plan.repair_crews is None else plan.repair_crews,
         "-", "assumed" if plan.repair_crews is None else "given", "repairs in parallel"),
        ("retire_after", "never" if plan.retire_after is None else plan.retire_after, "-",
         "assumed" if plan.retire_after is None else "given",
         "faults after which a node is retired instead of repaired"),
        ("faults_while_idle", False, "-", "assumed",
         "spares and nodes in restart do not fail; faults strike running nodes"),
    ]
    return pd.DataFrame(rows, columns=["parameter", "value", "unit", "status", "note"])
