"""Checking options and renaming keywords, the same way everywhere (issue 26).

- :func:`choice` - an argument that takes one of a fixed set of values (statsmodels'
  ``string_like``): one line naming the argument, the allowed values and what came;
- :func:`renamed_keywords` - a keyword renamed: the old name still works for one release,
  with a :class:`DeprecationWarning` naming the new one.

The names of powerlab's recurring options are listed in ``docs/vocabulary.md``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Collection

from .exceptions import OptionError

__all__ = ["choice", "renamed_keywords"]


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
