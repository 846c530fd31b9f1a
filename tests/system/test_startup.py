"""Start-up stays light: ``import powerlab`` and ``powerlab --help`` import no heavy library
(the times themselves are measured in benchmarks/bench_startup.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "statsmodels", "altair", "dask", "yaml",
         "pynvml", "prometheus_client", "vl_convert", "duckdb", "polars")

_PROBE = """
import json, sys
{code}
print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))
"""


def _modules(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(code=code)],
                         capture_output=True, text=True, check=True, timeout=60)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_powerlab_and_its_wings_is_light():
    mods = _modules("import powerlab, powerlab.telemetry, powerlab.site, powerlab.viz, "
                    "powerlab.throughput, powerlab.collect, powerlab.exceptions")
    assert not (mods & set(HEAVY)), sorted(mods & set(HEAVY))


def test_cli_help_is_light():
    mods = _modules("import contextlib, io\nfrom powerlab import cli\n"
                    "p = cli.build_parser()\n"
                    "with contextlib.redirect_stdout(io.StringIO()):\n"
                    "    try:\n        p.parse_args(['--help'])\n"
                    "    except SystemExit:\n        pass\n"
                    "    for name in cli.COMMAND_MODULES:\n"
                    "        try:\n"
                    "            p.parse_args([name.rstrip('_'), '--help'])\n"
                    "        except SystemExit:\n            pass\n")
    assert not (mods & set(HEAVY)), sorted(mods & set(HEAVY))


@pytest.mark.slow
def test_the_probe_sees_a_heavy_import():
    assert "pandas" in _modules("import powerlab.telemetry.schema")
