"""The main job on an embedded default: ``powerlab demo``.

:func:`run_demo` needs no input.  It is a chain of named steps (:mod:`.chain`, pvlib's
``ModelChain``), one module each, on the data bundled in ``data/``:

1. :mod:`.calibrate` reads the real MLPerf Training v4.0 GPT-3 power logs (64 nodes x 8
   H100, Apache-2.0) and the training log, and calibrates a job power profile through the
   logs' 2-s meters (:func:`powerlab.calibration.calibrate.calibrate_job`, what ``powerlab
   calibrate`` runs, on :func:`powerlab.calibration.profile.fit_profile`: step time, node
   power while computing and in the step dip, with their uncertainties); the log has no
   idle period, so node power is split into GPU and non-GPU parts by a stated prior
   (:data:`NODE_OVERHEAD_PRIOR`), and the scenario's node power equals the measured node
   power whatever the split;
2. :mod:`.forecast` forecasts a 16,384-GPU site (``data/scenarios/llama3_16k_h100.yaml``)
   running one synchronous job that starts on all GPUs at once, with checkpoints and
   failures, using the calibrated profile (:func:`powerlab.site.engine.forecast`), and
   checks the utility limits;
3. :mod:`.mitigations` compares mitigations (power floor, GPU ramp limit, battery), and
4. :mod:`.flexibility` finds what the site can shed within 30 s and at what cost;
5. :mod:`.interconnection` checks the forecast against the interconnection requirements,
   sizes the cheapest mitigation and screens resonance;
6. :mod:`.time_of_day` runs the time-of-day analysis
   (:func:`powerlab.throughput.dvfs.fit_time_of_day`) and the straggler search
   (:func:`powerlab.throughput.stragglers.find_stragglers`) on the synthetic twin
   (:func:`powerlab.throughput.synth.simulate_training`) driven by the real weather of a
   station next to the MGHPCC datacenter (MIT);
7. writes the facilities CSV with its JSON sidecar (:func:`powerlab.site.export.
   write_facilities_csv`),
8. :mod:`.report` one self-contained HTML report with the charts
   (:class:`powerlab.viz.report.Report`) that renders offline, and
9. the large-load study package of the bundled scenario (:mod:`.interconnection`).

Progress goes to ``progress`` (standard error by default), one line per step with its
duration.
"""

from .calibrate import NODE_OVERHEAD_PRIOR
from .chain import DemoResult, run_demo
from .flexibility import flex_figures
from .forecast import SITE_GPUS, demo_scenario, violation_probabilities
from .interconnection import (
    REQUIREMENTS,
    InterconnectionStudy,
    interconnection_study,
    study_package_step,
)
from .report import NOTICES, ReportInputs

__all__ = ["NODE_OVERHEAD_PRIOR", "NOTICES", "REQUIREMENTS", "SITE_GPUS", "DemoResult",
           "InterconnectionStudy", "ReportInputs", "demo_scenario", "flex_figures",
           "interconnection_study", "run_demo", "study_package_step",
           "violation_probabilities"]
