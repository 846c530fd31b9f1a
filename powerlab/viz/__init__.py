"""Charts and the offline report: the end of the data flow, drawing what the other wings
computed.

Every chart function takes a **tidy frame** with documented column names (or, through the
adapters, a powerlab results object) and returns an altair chart (a value: test it with
``to_dict()``).  Charts only draw: the few reductions they make (binning a long series to a
few thousand points, a histogram) exist so that raw telemetry never trips altair's
5,000-row limit, and they keep the extremes (each point carries the mean, minimum and
maximum of its bin).

Modules
-------
:mod:`~powerlab.viz.render`            the only altair importer: theme, notebook renderer, SVG/PNG
:mod:`~powerlab.viz.prepare`           pandas preparation: column checks, labels, downsampling
:mod:`~powerlab.viz.telemetry_charts`  telemetry over time
:mod:`~powerlab.viz.facility_charts`   facility power timeline with its band and events
:mod:`~powerlab.viz.ramp_charts`       ramp-rate distribution against the ramp limits
:mod:`~powerlab.viz.spectrum_charts`   oscillation spectrum with the limit bands
:mod:`~powerlab.viz.mitigation_charts` what each mitigation removes, at what cost
:mod:`~powerlab.viz.site_charts`       ForecastResult -> timeline, ramps, spectrum
:mod:`~powerlab.viz.throughput_charts` time of day and stragglers
:mod:`~powerlab.viz.flex_charts`       flexibility offer, power-throughput curve, curtailment plan
:mod:`~powerlab.viz.backtest_chart`    measured against forecast power of a backtest
:mod:`~powerlab.viz.report`            self-contained offline HTML report

Chart functions (re-exported here)
----------------------------------
:func:`telemetry_chart`          power / clock / temperature over time per GPU, host or fleet
:func:`telemetry_overview`       several telemetry metrics stacked, with a shared zoom
:func:`facility_chart`           facility power timeline with quantile band and event markers
:func:`ramp_rate_chart`          distribution of ramp rates with the limit marked
:func:`spectrum_chart`           oscillation spectrum with the limit bands shaded
:func:`spectrum_lines_chart`     the same with the spectral lines (flagged, harmonic, significant)
:func:`mitigation_chart`         swing and ramp reduction per mitigation, cost in tooltips
:func:`hour_of_day_chart`        hour-of-day effect with its confidence interval
:func:`throttle_share_chart`     share of GPU time under each throttle reason by hour
:func:`straggler_heatmap`        robust straggler score per host x GPU
:func:`forecast_charts`          ForecastResult -> timeline, ramps, spectrum
:func:`time_of_day_charts`       TimeOfDayResult -> hour-of-day profile, throttle shares
:func:`stragglers_chart`         StragglerResult -> heat map
:func:`flex_offer_chart`         MW sheddable against response time, per hold duration
:func:`flex_curve_chart`         step-rate loss against the power limit, with its band
:func:`flex_plan_chart`          a curtailment plan's power against its caps

The names are resolved on first use, so ``import powerlab.viz.report`` does not import
altair.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "render": ("DEFAULT_MAX_ROWS", "MAX_ROWS", "THEME", "to_png", "to_svg",
               "use_offline_renderer", "use_theme"),
    "prepare": ("downsample",),
    "telemetry_charts": ("TelemetryChartOptions", "telemetry_chart", "telemetry_overview"),
    "facility_charts": ("TimelineColumns", "facility_chart"),
    "ramp_charts": ("ramp_rate_chart",),
    "spectrum_charts": ("SpectrumColumns", "spectrum_chart", "spectrum_lines_chart"),
    "mitigation_charts": ("mitigation_chart",),
    "site_charts": ("forecast_charts",),
    "throughput_charts": ("HeatmapColumns", "HourOfDayColumns", "hour_of_day_chart",
                          "straggler_heatmap", "stragglers_chart", "throttle_share_chart",
                          "time_of_day_charts"),
    "flex_charts": ("flex_curve_chart", "flex_offer_chart", "flex_plan_chart"),
    "report": ("Report", "write_report"),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
