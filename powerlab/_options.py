"""Parameter sets as data: small frozen dataclasses of a function's options.

A function with many options takes one options object (``options=``) and, for the
keyword calls that predate it, the options' fields as keywords, which replace the
object's (``find_stragglers(tel, z_threshold=5.0)``).  :class:`Options` gives each such
dataclass the one constructor that does this, so the defaults exist once, in the
dataclass, however many functions share it.
"""

from __future__ import annotations

from dataclasses import fields

__all__ = ["Options"]


class Options:
    """Mixin of frozen option dataclasses: :meth:`from_kwargs` and :meth:`as_dict`."""

    @classmethod
    def from_kwargs(cls, options=None, **kw):
        """``options`` (default: the defaults) with the keyword options given replacing
        its fields.

        Raises
        ------
        TypeError
            A keyword that is not a field (the message names the fields), or
            ``options`` of another type.
        """
        names = [f.name for f in fields(cls)]
        bad = sorted(set(kw) - set(names))
        if bad:
            raise TypeError(f"unknown {cls.__name__} option(s) {bad}; expected some of "
                            f"{names}")
        if options is None:
            return cls(**kw)
        if not isinstance(options, cls):
            raise TypeError(f"options must be a {cls.__name__}, got "
                            f"{type(options).__name__}")
        return cls(**{**options.as_dict(), **kw}) if kw else options

    def as_dict(self) -> dict:
        """The fields as a dict, in their order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
