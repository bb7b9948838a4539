"""Reading albert_min's environment variables: one parser, one message.

    threads = variable("ALBERT_MIN_CPU_THREADS", whole_number(1, 256), default=1, unset_means="1",
                       wrong="not a thread count")

Every variable albert_min reads comes through ``variable``: unset or blank is ``default``; a value
``parse`` refuses is a SettingError (an AlbertMinError, so a script prints one ``error:`` line) that
names the variable, shows its value and says which values are accepted, e.g.
``ALBERT_MIN_CPU_THREADS=²: not a thread count; give a whole number from 1 to 256 (or unset
ALBERT_MIN_CPU_THREADS for 1)``. The variables: ALBERT_MIN_DEVICE and ALBERT_MIN_CPU_THREADS
(``device``), ALBERT_MIN_CACHE (``device.default_compile_cache``), ALBERT_MIN_KERNELS
(``albert_min.model.kernels``) and msrun's MS_WORKER_NUM (``parallel``).

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import os
import re

from .errors import AlbertMinError


class SettingError(AlbertMinError):
    """An environment variable albert_min reads holds a value it does not accept."""


def shown(text):
    """``text`` as a message shows it: as is where printable, else Python's escapes."""
    return text if text.isprintable() else ascii(text)[1:-1]


def variable(name, parse, default=None, unset_means=None, wrong="not accepted", error=SettingError):
    """``parse(value)`` of environment variable ``name`` (surrounding blanks stripped), or ``default`` where
    it is unset or blank. ``parse`` raises ValueError with the accepted values in words
    (``whole_number``, ``choice``); that is ``error`` (SettingError or a subclass of AlbertMinError)
    naming the variable, its value, what is ``wrong`` with it, the accepted values and, where given,
    what unsetting it means (``unset_means``)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        return parse(text)
    except ValueError as err:
        unset = f" (or unset {name} for {unset_means})" if unset_means else ""
        raise error(f"{name}={shown(text)}: {wrong}; {err}{unset}") from None


def whole_number(low, high):
    """A parser of ASCII digits from ``low`` to ``high`` ("²" and "٣" are digits to ``str.isdigit``, not here)."""
    def parse(text):
        if not re.fullmatch(r"[0-9]+", text) or not low <= int(text) <= high:
            raise ValueError(f"give a whole number from {low} to {high}")
        return int(text)
    return parse


def choice(values):
    """A parser of one of ``values`` (a dict: accepted spelling -> value), in any case."""
    def parse(text):
        if text.lower() not in values:
            raise ValueError(f"give one of {', '.join(values)} (any case)")
        return values[text.lower()]
    return parse


SWITCH = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}
