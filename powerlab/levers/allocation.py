"""The merit order of the curtailment levers: a planned site shed split over the levers a
plan may use, at least lost training.

The planned shed ``S(t) = P_full - P(t)`` [IT W] (:mod:`powerlab.flex.plan`) is covered
by the registered levers (:data:`powerlab.levers.registry.LEVERS`), the rule being
*marginal lost training per MW shed*, levers costing no step rate first.  Each lever's
step (:meth:`~powerlab.levers.lever.CurtailmentLever.allocate`) runs in the order of its
``plan_phase`` on the shared :class:`~powerlab.levers.shedstate.Allocation` and takes its part of what remains:

1. shifted starts (:mod:`powerlab.levers.shift`): a job starting in a shed stretch is
   held until it ends (no step rate lost; *delayed* GPU-hours); a held job, like a job
   not yet started or already ended, draws idle power, so its training power above idle
   sheds by itself;
2. the site battery (:mod:`powerlab.levers.storage`): the top of what remains, by water
   filling (the GPUs return to full power at once where it carries the whole shed);
3. pauses (:mod:`powerlab.levers.pause`): where capping cannot reach the shed, or costs
   more (it weighs the caps' cost, so it decides before them);
4. power caps or clock locks (:mod:`powerlab.levers.throttle`): the rest, in 5-W
   notches of the running jobs' limits, cheapest lost step rate per watt first; the
   lever is the tick's throttling lever, chosen per target by its response
   (:func:`~powerlab.levers.throttle.pick_throttle`).

A lever the plan may not use takes no step (its shed is zero).  The result is a
:class:`~powerlab.levers.shedstate.LeverSchedule`: per job and tick its limit, pause, hold; per lever its shed.
"""

from __future__ import annotations

import numpy as np

from .operating import Merit
from .registry import LEVERS
from .shedstate import Allocation, LeverSchedule, ShedContext

__all__ = ["allocate"]



def allocate(merit: Merit, shed_w: np.ndarray, context: ShedContext,
             levers: tuple[str, ...] | None = None) -> LeverSchedule:
    """Split a planned site shed over the levers in merit order (module docstring).

    Parameters
    ----------
    merit : Merit
        The jobs' operating points.
    shed_w : ndarray
        Planned shed ``P_full - P(t)`` per tick [IT W].
    context : ShedContext
        The ticks, the throttling lever per tick, the allowed rates, the boundary
        conversion, the longest hold and the levers' equipment.
    levers : tuple of str, optional
        The levers allowed (default: every registered one).

    Returns
    -------
    LeverSchedule
    """
    allowed = LEVERS.select(levers)
    state = Allocation(merit, shed_w, context, allowed)
    for first, members in sorted(LEVERS.families(allowed), key=lambda f: f[0].plan_phase):
        first.allocate(state, members)
    return state.schedule(LEVERS)
