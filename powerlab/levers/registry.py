"""The registered levers and mitigations: what the planners iterate over.

:data:`LEVERS` holds the curtailment levers of the flexibility offer and the curtailment
plan, in the order of the offer (``power_cap, clock_lock, pause, shift_start,
storage``); :data:`MITIGATIONS` the mitigations of the mitigation search, in the order of
an option's description (``smoothing, filler, stagger, storage``).  Both read like a
tuple of names (``"pause" in LEVERS``, ``", ".join(LEVERS)``); :meth:`LeverRegistry.get`
gives the object.

:func:`register_lever` adds a lever (a class decorator: an instance of the class joins
:data:`LEVERS` if it is a :class:`~powerlab.levers.lever.CurtailmentLever`, and
:data:`MITIGATIONS` if it is a :class:`~powerlab.levers.lever.Mitigation`);
:func:`unregister_lever` removes one (a test's own lever, afterwards).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..exceptions import PowerlabError
from .clocklock import ClockLock
from .filler import Filler
from .lever import CurtailmentLever, Lever, Mitigation
from .pause import Pause
from .powercap import PowerCap
from .shift import ShiftStart
from .smoothing import Smoothing
from .stagger import Stagger
from .storage import STORAGE

__all__ = ["LEVERS", "MITIGATIONS", "LeverRegistry", "register_lever", "unregister_lever"]


class LeverRegistry(Sequence):
    """Registered levers by name, in registration order (a sequence of names)."""

    def __init__(self, kind: str, levers: Iterable[Lever]):
        self.kind = kind
        self._levers: dict[str, Lever] = {}
        for lv in levers:
            self.add(lv)

    def __getitem__(self, i):
        return list(self._levers)[i]

    def __len__(self) -> int:
        return len(self._levers)

    def __contains__(self, name) -> bool:
        return name in self._levers

    def __repr__(self) -> str:
        return f"{self.kind}s{tuple(self._levers)}"

    def objects(self) -> tuple:
        """The registered objects, in order."""
        return tuple(self._levers.values())

    def get(self, name: str) -> Lever:
        """The object called ``name`` (one clear error otherwise)."""
        try:
            return self._levers[name]
        except KeyError:
            raise PowerlabError(f"unknown {self.kind} {name!r}; {self.kind}s are "
                                f"{', '.join(self._levers)}") from None

    def select(self, names: Iterable[str] | str | None = None) -> tuple:
        """The objects named (None: all), in registry order (one clear error names an
        unknown one)."""
        if names is None:
            return self.objects()
        if isinstance(names, str):
            names = [names]
        names = list(names)
        bad = [x for x in names if x not in self._levers]
        if bad:
            raise PowerlabError(f"unknown {self.kind} {bad[0]!r}; {self.kind}s are "
                                f"{', '.join(self._levers)}")
        return tuple(lv for n, lv in self._levers.items() if n in set(names))

    def by(self, attribute: str) -> tuple:
        """The objects ordered by ``attribute`` (registry order among equals)."""
        return tuple(sorted(self.objects(), key=lambda lv: getattr(lv, attribute)))

    def families(self, levers: Iterable[Lever] | None = None) -> list[tuple]:
        """``(first member, members)`` per family of ``levers`` (default: all), in
        registry order: a family's shared steps run once, on its first member."""
        out: dict[str, list] = {}
        for lv in self.objects() if levers is None else levers:
            out.setdefault(lv.family_key, []).append(lv)
        return [(members[0], tuple(members)) for members in out.values()]

    def add(self, lever: Lever) -> None:
        """Register ``lever`` (a name registered already is an error)."""
        if not lever.name:
            raise PowerlabError(f"{type(lever).__name__} has no name")
        if lever.name in self._levers:
            raise PowerlabError(f"a {self.kind} named {lever.name!r} is registered already")
        self._levers[lever.name] = lever

    def remove(self, name: str) -> None:
        """Unregister the lever called ``name``."""
        self.get(name)
        del self._levers[name]


#: The curtailment levers (offer and plan), in the order of the offer.
LEVERS = LeverRegistry("lever", (PowerCap(), ClockLock(), Pause(), ShiftStart(), STORAGE))
#: The mitigations of the mitigation search, in the order of an option's description.
MITIGATIONS = LeverRegistry("mitigation", (Smoothing(), Filler(), Stagger(), STORAGE))


def register_lever(cls: type) -> type:
    """Class decorator: register an instance of ``cls`` (a lever, a mitigation or both).

    Examples
    --------
    >>> @register_lever
    ... class Cooling(CurtailmentLever):        # doctest: +SKIP
    ...     name = "cooling_setpoint"
    """
    obj = cls()
    kinds = [(CurtailmentLever, LEVERS), (Mitigation, MITIGATIONS)]
    if not any(isinstance(obj, base) for base, _ in kinds):
        raise PowerlabError(f"{cls.__name__} is neither a CurtailmentLever nor a Mitigation")
    for base, registry in kinds:
        if isinstance(obj, base):
            registry.add(obj)
    return cls


def unregister_lever(name: str) -> None:
    """Remove the lever or mitigation called ``name`` from every registry holding it."""
    found = [r for r in (LEVERS, MITIGATIONS) if name in r]
    if not found:
        raise PowerlabError(f"no lever or mitigation named {name!r} is registered")
    for r in found:
        r.remove(name)
