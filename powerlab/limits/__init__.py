"""Limits: what a utility or a scenario states of a site's power, and how it is measured.

A utility's interconnection requirement spec (a YAML file) and a scenario's ``limits:``
block are read into one :class:`~powerlab.limits.requirements.RequirementSpec` and
evaluated by the same code, with the metrics the requirements are stated in.  This wing
sits below both the forecast (:mod:`powerlab.site`) and the checks of
:mod:`powerlab.interconnect`, which import it; it imports only :mod:`powerlab.telemetry`
(time parsing) and the base modules.

Modules
-------
:mod:`~powerlab.limits.requirements`   requirement specs of a utility, from YAML
:mod:`~powerlab.limits.evaluation`     the one evaluation of a spec on a power series
:mod:`~powerlab.limits.scenario_limits` a scenario's ``limits:`` block, read as a spec
:mod:`~powerlab.limits.loadmetrics`    the metrics limits are stated in: ramps, deviation,
                                       bands, steps, sag load loss
:mod:`~powerlab.limits.ramps`          ramps of window means (one definition for every wing)
:mod:`~powerlab.limits.interval_ramps` ramps of interval means, reduced chunk by chunk
:mod:`~powerlab.limits.yamlspec`       the bounded YAML loader and key-path errors
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "requirements": (
        "BOUNDARIES", "DEVIATION_RULES", "GridMode", "Requirement", "RequirementSpec",
        "parse_requirements", "read_requirements",
    ),
    "evaluation": (
        "evaluate_power", "plan_requirements",
    ),
    "scenario_limits": (
        "Limits", "limits_spec",
    ),
    "loadmetrics": (
        "band_oscillation", "band_windows", "gated_ramp", "largest_deviation",
        "largest_step", "sag_load_loss",
    ),
    "ramps": (
        "ramp_of_means", "ramps_of_means",
    ),
    "interval_ramps": (
        "IntervalRamps",
    ),
    "yamlspec": (
        "Section", "load_yaml",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
