"""The sections of the large-load study package, one module each.

==================  ================================================================
module              section
==================  ================================================================
``figures``         1. peak, ramps and steps by exceedance probability
``energisation``    2. the energisation schedule within the spec's rise limits
``spectrum``        3. oscillation: the short window's narrow-band lines
``pmuview``         4. what P- and M-class reference PMUs report
``ridethrough``     5. the ride-through table from the disturbance model
``playback``        PSCAD, PowerFactory and COMTRADE playback files
==================  ================================================================

and the pieces they share: :mod:`.section` (the :class:`~.section.Section` hooks and the
ordered registry), :mod:`.shortwindow` (the short window forecast at a fine tick) and
:mod:`.html` (the page's tables).  The text summary and the printable page that put the
sections together are :mod:`powerlab.interconnect.studypage`; the entry point is
:func:`powerlab.interconnect.studypackage.study_package`.

Every module of this package is imported here, so a section registers itself
(:func:`~.section.register`) by being a module here: adding a section touches one module
(and its test).
"""

import importlib
import pkgutil

from .section import Section, Study, register, sections, unregister

__all__ = ["Section", "Study", "register", "sections", "unregister"]

for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")
