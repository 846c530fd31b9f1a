"""Tests of powerlab.reliability.rates and .hazard: exact Poisson rates reproduce the
Llama 3 snapshot, job MTBF scales as 1/N, and the hazard model recovers known hazard ratios
on synthetic fleets (coverage over seeds) while staying silent on null fleets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import poisson

from powerlab._summary import Results
from powerlab.exceptions import AnalysisError
from powerlab.iotools.xid import parse_kernel_xid
from powerlab.reliability.hazard import exposure_table, fit_hazard, simulate_fleet_failures
from powerlab.reliability.rates import failure_rates, garwood_interval, job_mtbf, llama3_rates
from powerlab.telemetry.events import ROOT_CAUSES

LLAMA_GPU_H = 54 * 24 * 16_384


def test_garwood_matches_known_values_and_coverage():
    # k = 0: upper = -ln(0.025) = 3.689; k = 10: [4.795, 18.390] (Garwood's tables)
    lo, hi = garwood_interval([0, 10], 1.0)
    np.testing.assert_allclose(lo, [0.0, 4.7954], atol=1e-3)
    np.testing.assert_allclose(hi, [3.6889, 18.3904], atol=1e-3)
    # exact coverage >= 95 % for every mean (computed, not simulated)
    for mu in (0.5, 3.0, 12.0, 40.0):
        k = np.arange(0, int(mu * 4 + 30))
        lo, hi = garwood_interval(k, 1.0)
        cover = poisson.pmf(k, mu)[(lo <= mu) & (mu <= hi)].sum()
        assert cover >= 0.95, (mu, cover)


def test_llama3_rates_and_intervals():
    r = llama3_rates()
    f = r.summary_frame()
    assert r.gpu_hours == LLAMA_GPU_H == 21_233_664
    assert r.total == 419 and f.loc["total", "failures"] == 419
    assert f.loc["total", "rate_per_gpu_h"] == pytest.approx(1.9733e-5, rel=1e-4)
    assert f.loc["total", "lower"] == pytest.approx(1.7888e-5, rel=1e-3)
    assert f.loc["total", "upper"] == pytest.approx(2.1716e-5, rel=1e-3)
    assert f.loc["faulty_gpu", "rate_per_gpu_h"] == pytest.approx(148 / LLAMA_GPU_H)
    assert f.loc["gpu_hbm3_memory", "lower"] == pytest.approx(2.653e-6, rel=1e-3)
    assert f.loc["gpu_hbm3_memory", "upper"] == pytest.approx(4.270e-6, rel=1e-3)
    rates = r.rates_per_gpu_h
    assert set(rates) == {c.name for c in ROOT_CAUSES}
    assert sum(rates.values()) == pytest.approx(419 / LLAMA_GPU_H)
    # the whole job: an interruption every ~3 h (the paper: 419 in 54 days = 3.09 h)
    m = job_mtbf(r, [16_384, 1024])
    assert m["mtbf_h"].iloc[0] == pytest.approx(54 * 24 / 419)
    assert m["lower_h"].iloc[0] == pytest.approx(2.8106, rel=1e-3)
    assert m["upper_h"].iloc[0] == pytest.approx(3.4120, rel=1e-3)
    assert m["mtbf_h"].iloc[1] == pytest.approx(16 * m["mtbf_h"].iloc[0])
    assert "faulty_gpu" in r.summary() and "<pre>" in r._repr_html_()


def test_rates_from_events_with_zero_categories():
    log = """\
2024-05-17T10:00:00+0000 n1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=p, off the bus
2024-05-18T10:00:00+0000 n1 kernel: NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=p, DBE
2024-05-18T11:00:00+0000 n2 kernel: NVRM: Xid (PCI:0000:5e:00): 13, pid=1, name=p, SM
2024-05-19T11:00:00+0000 n2 kernel: NVRM: Xid (PCI:0000:5e:00): 95, pid=1, name=p, ue
"""
    ev = parse_kernel_xid(log)
    r = failure_rates(ev, gpu_hours=1000.0, categories=[c.name for c in ROOT_CAUSES])
    f = r.summary_frame()
    assert r.total == 3                                  # the application XID 13 is not one
    assert f.loc["gpu_hbm3_memory", "failures"] == 2 and f.loc["nic", "failures"] == 0
    assert f.loc["nic", "lower"] == 0 and f.loc["nic", "upper"] == pytest.approx(3.689e-3,
                                                                                 rel=1e-3)
    sec = r.interruptions_section(restart={"detection_s": 600})
    assert sec == {"model": "none", "restart": {"detection_s": 600.0},
                   "rates_per_gpu_h": {"faulty_gpu": 1e-3, "gpu_hbm3_memory": 2e-3}}
    up = r.interruptions_section(bound="upper", include_zero=True)["rates_per_gpu_h"]
    assert len(up) == 18 and up["nic"] == pytest.approx(3.689e-3, rel=1e-3)
    assert up["faulty_gpu"] == pytest.approx(f.loc["faulty_gpu", "upper"])
    by_kind = failure_rates(ev, 1000.0, by="kind")
    assert by_kind.rates_per_gpu_h["application"] == pytest.approx(1e-3)


@pytest.mark.bad_input("reliability")
def test_rates_refuse_bad_exposure():
    ev = parse_kernel_xid("")
    with pytest.raises(AnalysisError, match="gpu_hours"):
        failure_rates(ev, 0.0)
    with pytest.raises(AnalysisError, match="no column"):
        failure_rates(ev, 10.0, by="severity")
    with pytest.raises(ValueError):
        garwood_interval(-1, 1.0)
    with pytest.raises(AnalysisError):
        job_mtbf(llama3_rates(), 0)


def test_hazard_recovers_one_fleet():
    r = fit_hazard(simulate_fleet_failures(seed=3))
    f = r.summary_frame()
    assert f.loc["temp_gpu_c", "lower"] < 1.5 < f.loc["temp_gpu_c", "upper"]
    assert f.loc["temp_gpu_c", "p_value"] < 0.01
    assert f.loc["power_w", "lower"] < 1.0 < f.loc["power_w", "upper"]
    assert r.baseline_rate_per_gpu_h == pytest.approx(1.5e-4, rel=0.3)
    assert 0.8 < r.dispersion < 1.2
    assert "per 10 °C" in r.summary()


N_SEEDS = 100


@pytest.mark.slow
def test_hazard_ratio_coverage_over_seeds():
    """HR 1.5 per 10 °C (power: none) is inside the 95 % interval in >= 90 % of seeds."""
    hits_t = hits_p = 0
    for seed in range(N_SEEDS):
        f = fit_hazard(simulate_fleet_failures(seed=seed)).summary_frame()
        hits_t += f.loc["temp_gpu_c", "lower"] <= 1.5 <= f.loc["temp_gpu_c", "upper"]
        hits_p += f.loc["power_w", "lower"] <= 1.0 <= f.loc["power_w", "upper"]
    print(f"\ncoverage over {N_SEEDS} seeds: temperature {hits_t / N_SEEDS:.2f}, "
          f"power {hits_p / N_SEEDS:.2f}")
    assert 0.90 <= hits_t / N_SEEDS <= 0.99      # not too wide either (nominal 95 %)
    assert hits_p / N_SEEDS >= 0.90


@pytest.mark.slow
def test_null_fleets_reject_at_the_nominal_rate():
    rejections = 0
    for seed in range(N_SEEDS):
        d = simulate_fleet_failures(seed=10_000 + seed, hr_temp_per_10c=1.0)
        rejections += fit_hazard(d).summary_frame().loc["temp_gpu_c", "p_value"] < 0.05
    print(f"\nnull fleets: {rejections} of {N_SEEDS} reject at 5 %")
    # nominal 5 % (binomial sd 2.2 %): neither anti-conservative nor blind
    assert 0.01 <= rejections / N_SEEDS <= 0.10


def test_hazard_has_power_against_an_effect():
    """Not vacuous: a real effect is found in nearly every seed."""
    found = sum(fit_hazard(simulate_fleet_failures(seed=s)).summary_frame()
                .loc["temp_gpu_c", "p_value"] < 0.05 for s in range(20))
    assert found >= 18


def test_exposure_table_from_telemetry_and_events():
    rng = np.random.default_rng(0)
    t = pd.date_range("2024-05-01", periods=48 * 6, freq="10min", tz="UTC")
    rows = []
    for g in range(4):
        rows.append(pd.DataFrame({"timestamp": t, "host": "n1", "gpu_index": g,
                                  "temp_gpu_c": 60 + 5 * g + rng.normal(0, 1, len(t)),
                                  "power_w": 500 + rng.normal(0, 10, len(t))}))
    tel = pd.concat(rows, ignore_index=True)
    log = ("2024-05-01T10:00:00+0000 n1 kernel: NVRM: Xid (PCI:0000:5e:00): 79, GPU gone\n"
           "2024-05-02T10:00:00+0000 n1 kernel: NVRM: Xid (PCI:0000:5e:00): 13, app\n")
    dev = pd.DataFrame({"host": ["n1"], "pci_bus_id": ["00000000:5E:00.0"], "gpu_index": [3],
                        "gpu_uuid": ["GPU-3"]})
    ev = parse_kernel_xid(log, devices=dev)
    tab = exposure_table(tel, ev)
    assert len(tab) == 8 and tab["gpu_hours"].sum() == pytest.approx(4 * 48, rel=1e-9)
    assert tab["failures"].sum() == 1            # XID 13 is not a failure
    one = tab[tab["failures"] == 1].iloc[0]
    assert one["gpu_index"] == 3 and one["period"] == pd.Timestamp("2024-05-01", tz="UTC")
    assert tab.loc[tab.gpu_index == 3, "temp_gpu_c"].mean() == pytest.approx(75, abs=0.5)


@pytest.mark.bad_input("reliability")
def test_hazard_refuses_too_few_failures_and_constant_covariates():
    d = simulate_fleet_failures(n_gpus=10, periods=2, seed=0)
    with pytest.raises(AnalysisError, match="failures"):
        fit_hazard(d)
    d = simulate_fleet_failures(seed=0).assign(power_w=500.0)
    with pytest.raises(AnalysisError, match="does not vary"):
        fit_hazard(d)
    with pytest.raises(AnalysisError, match="lacks"):
        fit_hazard(d, covariates=("temp_mem_c",))


def test_interruptions_section_is_what_the_scenario_parser_takes():
    """The section parses as a scenario's interruptions mapping (once the interruption
    model of powerlab.site is present on this branch)."""
    mod = pytest.importorskip("powerlab.reliability.interruptions")
    if not hasattr(mod, "parse_interruptions"):
        pytest.skip("powerlab.reliability.interruptions has no parse_interruptions yet")
    from powerlab.limits.yamlspec import Section

    sec = llama3_rates().interruptions_section(
        restart={"detection_s": 300, "drain_s": 60, "reschedule_s": 900})
    model = mod.parse_interruptions(Section(sec, "interruptions", None))
    assert dict(zip(model.causes, model.rates_per_gpu_h)) == pytest.approx(
        llama3_rates().rates_per_gpu_h)
    assert sum(model.rates_per_gpu_h) == pytest.approx(419 / LLAMA_GPU_H)


def test_pipeline_from_telemetry_and_events_recovers_the_hazard_ratio():
    """Hourly telemetry of 200 GPUs over 60 days, failures drawn per hour at HR 1.5 per
    10 °C and written as events; exposure_table + fit_hazard recover it."""
    rng = np.random.default_rng(42)
    n_gpu, hours = 200, 60 * 24
    t = pd.date_range("2025-01-01", periods=hours, freq="1h", tz="UTC")
    off = rng.normal(0, 6, n_gpu)
    temp = 65 + off[None, :] + 4 * np.sin(2 * np.pi * np.arange(hours) / 24)[:, None] \
        + rng.normal(0, 1, (hours, n_gpu))
    power = 550 + rng.normal(0, 40, (hours, n_gpu))
    lam = 1e-3 * 1.5 ** ((temp - 65) / 10)
    k = rng.poisson(lam)
    tel = pd.DataFrame({"timestamp": np.repeat(t, n_gpu), "host": "n1",
                        "gpu_index": np.tile(np.arange(n_gpu), hours),
                        "temp_gpu_c": temp.ravel(), "power_w": power.ravel()})
    hit = np.flatnonzero(k.ravel())
    ev = pd.DataFrame({"timestamp": tel["timestamp"].to_numpy()[hit]
                       + pd.Timedelta("10min"), "host": "n1",
                       "gpu_index": tel["gpu_index"].to_numpy()[hit],
                       "root_cause": "faulty_gpu"})
    ev = ev.loc[ev.index.repeat(k.ravel()[hit])]
    tab = exposure_table(tel, ev)
    assert tab["failures"].sum() == k.sum() and len(tab) == n_gpu * 60
    assert tab["gpu_hours"].sum() == pytest.approx(n_gpu * hours)
    f = fit_hazard(tab).summary_frame()
    assert f.loc["temp_gpu_c", "lower"] < 1.5 < f.loc["temp_gpu_c", "upper"]
    assert f.loc["power_w", "lower"] < 1.0 < f.loc["power_w", "upper"]


def test_rates_and_hazard_results_display_through_the_results_base():
    """FailureRates and HazardResult are powerlab Results: ``str``, ``repr`` and the HTML
    are their summary's (as before the base), and neither defines a display itself."""
    for r in (llama3_rates(), fit_hazard(simulate_fleet_failures(seed=3))):
        assert isinstance(r, Results)
        assert not {"__repr__", "__str__", "_repr_html_"} & set(vars(type(r)))
        text = r.summary().as_text()
        assert str(r) == repr(r) == text and text
        assert r._repr_html_() == r.summary().as_html()
    assert repr(llama3_rates()).startswith("Failure rates by root_cause: 419 failures")
