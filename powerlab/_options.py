"""Options, the same way everywhere (issue 26).

- :class:`Options` - parameter sets as data: small frozen dataclasses of a function's
  options.  A function with many options takes one options object (``options=``) and,
  for the keyword calls that predate it, the options' fields as keywords, which replace
  the object's (``find_stragglers(tel, z_threshold=5.0)``); the defaults exist once, in
  the dataclass, however many functions share it.
- :func:`choice` - an argument that takes one of a fixed set of values (statsmodels'
  ``string_like``): one line naming the argument, the allowed values and what came;
- :func:`renamed_keywords` - a keyword renamed: the old name still works for one release,
  with a :class:`DeprecationWarning` naming the new one; :class:`renamed_attribute` the
  same for an attribute.

The names of powerlab's recurring options are listed in ``docs/vocabulary.md``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Collection
from dataclasses import fields

from .exceptions import OptionError

__all__ = ["Options", "choice", "renamed_attribute", "renamed_keywords"]


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


def choice(value, name: str | None, allowed: Collection, *, error: Callable[[str], Exception]
           | type[Exception] = OptionError):
    """``value`` if it is one of ``allowed``, else a one-line error naming them.

    Parameters
    ----------
    value : object
        What the caller passed.
    name : str or None
        The argument's name as the caller wrote it (``"boundary"``, ``"--scope"``); None
        where the error names it already (a YAML key path): ``"expected ..."``.
    allowed : collection
        The allowed values, in the order the message lists them.
    error : exception class or callable, default OptionError
        Builds the exception from the message (e.g. ``AnalysisError``, or a YAML section's
        key-path error).

    Returns
    -------
    object
        ``value``, unchanged.

    Raises
    ------
    OptionError
        ``"<name> must be one of 'a', 'b' or 'c', got 'x'"`` (or what ``error`` builds).
    """
    try:
        ok = value in allowed
    except TypeError:           # an unhashable value against a set or dict
        ok = False
    if ok:
        return value
    names = [repr(a) for a in allowed]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    what = "expected" if name is None else f"{name} must be"
    raise error(f"{what} {'one of ' if len(names) > 2 else ''}{listed}, got {value!r}")


def renamed_keywords(**renames: str) -> Callable:
    """Decorator: accept each old keyword (``old="new"``) for one release.

    A call with the old name warns (:class:`DeprecationWarning`) and passes the value under
    the new one; a call with both names is an :class:`OptionError`.

    Examples
    --------
    >>> @renamed_keywords(scope="boundary")
    ... def power_w(boundary="facility"): ...
    """
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise OptionError(f"{fn.__name__}() got both {old}= and {new}=; "
                                          f"{old} is the old name of {new}, pass {new} only")
                    warnings.warn(f"{fn.__name__}(): {old}= is renamed {new}=; the old name "
                                  "will be removed in the next release", DeprecationWarning,
                                  stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)
        inner.__renamed_keywords__ = dict(renames)
        return inner
    return wrap


class renamed_attribute:      # lower case: used like ``property``
    """Class attribute: the old name of attribute ``new``, read for one release with a
    :class:`DeprecationWarning` (``scope = renamed_attribute("boundary")``)."""

    def __init__(self, new: str):
        self.new = new
        self.__doc__ = f"Deprecated name of :attr:`{new}`."

    def __set_name__(self, owner, name: str) -> None:
        self.owner, self.old = owner.__name__, name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        warnings.warn(f"{self.owner}.{self.old} is renamed {self.owner}.{self.new}; the old "
                      "name will be removed in the next release", DeprecationWarning,
                      stacklevel=2)
        return getattr(obj, self.new)
