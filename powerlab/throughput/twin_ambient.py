"""The ambient air temperature that drives the synthetic twin
(:mod:`powerlab.throughput.synth`): a sinusoid following the site's civil clock, or a
real weather series checked and interpolated onto the twin's grid.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..exceptions import ScenarioError
from ..telemetry.timeutil import to_epoch_ns
from .twin_physics import TwinParameters

__all__ = ["ambient_on_grid", "local_hours", "sinusoidal_ambient"]


def sinusoidal_ambient(index: pd.DatetimeIndex, *, mean_c: float = 24.0,
                       swing_c: float = 12.0, peak_hour: float = 15.0,
                       site_tz: str = "America/New_York") -> pd.Series:
    """A sinusoidal daily ambient temperature following the site's civil clock.

    Parameters
    ----------
    index : pandas.DatetimeIndex
        tz-aware timestamps.
    mean_c : float
        Daily mean [degC].
    swing_c : float
        Peak-to-trough swing [K].
    peak_hour : float
        Local (civil, daylight-saving aware) hour of the maximum [h].
    site_tz : str
        IANA time zone of the site.

    Returns
    -------
    pandas.Series
        Ambient temperature [degC] on ``index`` (converted to UTC).
    """
    if not isinstance(index, pd.DatetimeIndex) or index.tz is None:
        raise ScenarioError("index must be a tz-aware DatetimeIndex", key="index")
    h = local_hours(index, site_tz)
    vals = mean_c + 0.5 * swing_c * np.cos(2 * np.pi * (h - peak_hour) / 24.0)
    return pd.Series(vals, index=index.tz_convert("UTC"), name="temp_air_c")


def local_hours(index: pd.DatetimeIndex, site_tz: str) -> np.ndarray:
    """Local (civil, daylight-saving aware) hour of day of each timestamp [h]."""
    loc = index.tz_convert(site_tz)
    return (loc.hour + loc.minute / 60.0 + loc.second / 3600.0).to_numpy(dtype=float)


def ambient_on_grid(ambient, grid: pd.DatetimeIndex, p: TwinParameters,
                    site_tz: str) -> np.ndarray:
    """The ambient temperature on the twin's grid [degC]: ``ambient`` (a Series, or a frame
    with ``temp_air_c``, covering the run) interpolated, or the sinusoid of ``p``.

    Raises
    ------
    powerlab.exceptions.ScenarioError
        An ambient series that is not tz-indexed, has fewer than two values, does not
        cover the run or leaves [-60, 60] degC (key ``ambient``).
    """
    if ambient is None:
        return sinusoidal_ambient(grid, mean_c=p.ambient_mean_c, swing_c=p.ambient_swing_c,
                                  peak_hour=p.ambient_peak_hour,
                                  site_tz=site_tz).to_numpy()
    if isinstance(ambient, pd.DataFrame):
        if "temp_air_c" not in ambient.columns:
            raise ScenarioError("an ambient DataFrame needs a 'temp_air_c' column [degC]",
                                key="ambient")
        ambient = ambient["temp_air_c"]
    if not isinstance(ambient, pd.Series):
        raise ScenarioError("ambient must be a pandas Series (or DataFrame with "
                            "'temp_air_c') indexed by tz-aware timestamps", key="ambient")
    if not isinstance(ambient.index, pd.DatetimeIndex) or ambient.index.tz is None:
        raise ScenarioError("ambient must be indexed by tz-aware timestamps (UTC)",
                            key="ambient")
    a = pd.to_numeric(ambient, errors="coerce").astype("float64").dropna().sort_index()
    if len(a) < 2:
        raise ScenarioError("ambient has fewer than two valid values", key="ambient")
    at = to_epoch_ns(a.index)
    gt = to_epoch_ns(grid)
    if gt[0] < at[0] - 3600e9 or gt[-1] > at[-1] + 3600e9:
        raise ScenarioError(
            f"ambient covers {a.index[0]} .. {a.index[-1]} but the run spans "
            f"{grid[0]} .. {grid[-1]}; give a longer series or a shorter run",
            key="ambient")
    if (a < -60).any() or (a > 60).any():
        raise ScenarioError("ambient values outside [-60, 60] degC (kelvin or "
                            "Fahrenheit?)", key="ambient")
    return np.interp(gt, at, a.to_numpy())
