"""The registered levers and mitigations: what the planners iterate over.

:data:`LEVERS` holds the curtailment levers of the flexibility offer and the curtailment
plan, in the order of the offer (``power_cap, clock_lock, pause, shift_start,
storage``: their ``offer_order``); :data:`MITIGATIONS` the mitigations of the mitigation
search, in the order of an option's description (``smoothing, filler, stagger,
storage``: their ``search_order``).  Both read like a tuple of names (``"pause" in
LEVERS``, ``", ".join(LEVERS)``); :meth:`LeverRegistry.get` gives the object.

Levers register themselves: each module of this package decorates its class with
:func:`register_lever` (an instance joins :data:`LEVERS` if it is a
:class:`~powerlab.levers.lever.CurtailmentLever`, and :data:`MITIGATIONS` if it is a
:class:`~powerlab.levers.lever.Mitigation`), and the registries import every public
module of the package the first time they are read (as the reader registry,
:mod:`powerlab.iotools.registry`, does), so a new lever is one module and its test.
:func:`unregister_lever` removes one (a test's own lever, afterwards).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Sequence

from ..exceptions import PowerlabError
from .lever import CurtailmentLever, Lever, Mitigation

__all__ = ["LEVERS", "MITIGATIONS", "LeverRegistry", "register_lever", "unregister_lever"]


def _import_lever_modules() -> None:
    """Import every public module of :mod:`powerlab.levers` once: each registers its own
    lever (a new module needs no import line anywhere else)."""
    package = importlib.import_module(__package__)
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__package__}.{info.name}")


class LeverRegistry(Sequence):
    """Registered levers by name, ordered by ``order`` (an attribute of the levers;
    registration order among equals): a sequence of names.

    Parameters
    ----------
    kind : str
        ``"lever"`` or ``"mitigation"`` (in messages).
    order : str
        The levers' attribute that orders them (``offer_order``, ``search_order``).
    levers : iterable of Lever
        Levers registered at once (the package's own register themselves).
    """

    _loaded = False

    def __init__(self, kind: str, order: str = "offer_order", levers: Iterable[Lever] = ()):
        self.kind = kind
        self.order = order
        self._by_name: dict[str, Lever] = {}
        self._ordered: dict[str, Lever] | None = None     # sorted once per change
        for lv in levers:
            self.add(lv)

    @property
    def _levers(self) -> dict[str, Lever]:
        """The registered levers by name, in order (the package's modules imported on the
        first read)."""
        if not LeverRegistry._loaded:
            LeverRegistry._loaded = True
            _import_lever_modules()
        if self._ordered is None:
            seq = {name: i for i, name in enumerate(self._by_name)}
            self._ordered = dict(sorted(self._by_name.items(), key=lambda kv: (
                getattr(kv[1], self.order), seq[kv[0]])))
        return self._ordered

    def __getitem__(self, i):
        return list(self._levers)[i]

    def __iter__(self):
        return iter(list(self._levers))

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
        levers = self._levers
        bad = [x for x in names if x not in levers]
        if bad:
            raise PowerlabError(f"unknown {self.kind} {bad[0]!r}; {self.kind}s are "
                                f"{', '.join(levers)}")
        return tuple(lv for n, lv in levers.items() if n in set(names))

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
        if lever.name in self._by_name:
            raise PowerlabError(f"a {self.kind} named {lever.name!r} is registered already")
        self._by_name[lever.name] = lever
        self._ordered = None

    def remove(self, name: str) -> None:
        """Unregister the lever called ``name``."""
        self.get(name)
        del self._by_name[name]
        self._ordered = None


#: The curtailment levers (offer and plan), in the order of the offer.
LEVERS = LeverRegistry("lever", "offer_order")
#: The mitigations of the mitigation search, in the order of an option's description.
MITIGATIONS = LeverRegistry("mitigation", "search_order")


def register_lever(lever):
    """Register a lever, a mitigation or both: a class decorator (an instance of the
    class is registered) or a call on an instance; returns its argument.

    Examples
    --------
    >>> @register_lever
    ... class Cooling(CurtailmentLever):        # doctest: +SKIP
    ...     name = "cooling_setpoint"
    """
    obj = lever() if isinstance(lever, type) else lever
    kinds = [(CurtailmentLever, LEVERS), (Mitigation, MITIGATIONS)]
    if not any(isinstance(obj, base) for base, _ in kinds):
        raise PowerlabError(f"{type(obj).__name__} is neither a CurtailmentLever nor a "
                            "Mitigation")
    for base, registry in kinds:
        if isinstance(obj, base):
            registry.add(obj)
    return lever


def unregister_lever(name: str) -> None:
    """Remove the lever or mitigation called ``name`` from every registry holding it."""
    found = [r for r in (LEVERS, MITIGATIONS) if name in r]
    if not found:
        raise PowerlabError(f"no lever or mitigation named {name!r} is registered")
    for r in found:
        r.remove(name)
