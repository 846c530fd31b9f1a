"""Step 4 of the demo, flexibility: what the site can shed when the grid asks, and at
what training cost (:func:`powerlab.flex.offer.flex_offer` with the prior curve)."""

from __future__ import annotations

from ..flex.offer import default_window, flex_offer

__all__ = ["flex_figures"]


def flex_figures(scen, *, draws: int = 3, seed: int = 1) -> dict[str, float]:
    """The cheapest power cap shedding >= 25 % of IT power within 30 s over the demo's
    hold window (up to 3 h; :func:`powerlab.flex.offer.flex_offer`, prior curve)."""
    w0, w1 = default_window(scen, 3 * 3600.0)
    hold = (w1 - w0).total_seconds()
    off = flex_offer(scen, hold_s=hold, levels_w=[500, 400, 300, 250, 200], draws=draws,
                     seed=seed)
    b = off.best(30.0, hold, 25.0)
    if b is None:
        return {"flex_hold_s": hold, "flex_shed_megawatts": 0.0}
    return {"flex_hold_s": hold, "flex_shed_megawatts": float(b["shed_megawatts"]),
            "flex_shed_pct_of_it": float(b["shed_pct_of_it"]),
            "flex_power_limit_w": float(b["power_limit_w"]),
            "flex_step_rate_loss_pct": float(b["step_rate_loss_pct"])}
