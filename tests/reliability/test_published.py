"""The published fleets against the model fitted on the InfiniteHBD trace alone (issue 36):
fitted first, compared once; the table below is docs/reliability_analytics.md section 7.

Sources (figures as the issue quotes them):
- Llama 3 405B, arXiv:2407.21783, Table 5 and 3.3.4: 466 interruptions, 419 unexpected,
  54 days, 16,384 H100, > 90 % effective training time;
- Kokolis et al., HPCA'25, arXiv:2410.21680: MTTF 7.9 h at 1,024 GPUs, 1.8 h projected at
  16,384;
- ByteRobust, arXiv:2509.16293: 97 % ETTR, three months, 9,600 GPUs;
- Delta, SC'25, arXiv:2503.11901: about 5 % over-provisioning at scale.
"""

import warnings

import pytest

from powerlab.data import bundled_path
from powerlab.exceptions import DataQualityWarning
from powerlab.iotools.faults import read_infinitehbd
from powerlab.reliability.faultfit import fit_faults
from powerlab.reliability.published import compare_published


@pytest.fixture(scope="module")
def table():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        f, m = read_infinitehbd(bundled_path("infinitehbd-fault-trace",
                                             "fault_trace.json.gz"))
    fit = fit_faults(f, n_nodes=m["n_nodes"], start=m["start"], end=m["end"],
                     source="infinitehbd")
    return compare_published(fit.params()).set_index("figure")


def test_llama3_interruptions_within_15_percent(table):
    total = table.loc["interruptions, 54 d, 16,384 GPUs"]
    assert total["within"] is True and total["powerlab"] == pytest.approx(473.6, abs=1)
    unexp = table.loc["unexpected interruptions"]
    assert unexp["within"] is True and unexp["powerlab"] == pytest.approx(468.7, abs=1)
    assert unexp["ratio"] == pytest.approx(1.119, abs=0.005)     # 12 % high


def test_kokolis_mttf_is_not_reproduced_and_says_why(table):
    # as it came out: InfiniteHBD's fleet is ~1.5x (16k) to 5.6x (1,024) more reliable
    # per job than Meta's RSC-1 job failures; not within 15 %
    k1 = table.loc["MTTF, 1,024-GPU job"]
    k16 = table.loc["MTTF projected, 16,384 GPUs"]
    assert k1["within"] is False and k16["within"] is False
    assert k1["powerlab"] == pytest.approx(44.2, abs=0.2)
    assert k16["powerlab"] == pytest.approx(2.76, abs=0.02)
    assert "fleet" in k1["note"]


def test_figures_whose_inputs_are_missing_show_the_range(table):
    for fig in ("effective training time (> 90 %)", "ETTR, 3 months, 9,600 GPUs",
                "over-provisioning at scale"):
        row = table.loc[fig]
        assert row["within"] is None and row["lower"] <= row["powerlab"] <= row["upper"]
        assert "inside that range" in row["note"]
    assert table.loc["over-provisioning at scale", "powerlab"] == pytest.approx(0.031,
                                                                                abs=0.003)
