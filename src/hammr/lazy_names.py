"""A package's public names imported when first read (PEP 562), not with the package: the
command line must not pay for the agent runtime, numpy, PIL or httpx to print its help.

A package lists where each name lives and defines its module ``__getattr__`` and
``__dir__`` through :func:`lazy_attribute` and :func:`lazy_dir`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Mapping
from typing import Any


def lazy_attribute(package: str, homes: Mapping[str, str], name: str) -> Any:
    """``name`` of ``package``, imported from the module ``homes`` names (and kept in the
    package, so that the next read is a plain one); AttributeError for another name."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    setattr(sys.modules[package], name, value)
    return value


def lazy_dir(package: str, public: Iterable[str]) -> list[str]:
    """What ``dir(package)`` shows: what it holds and the names it imports when read."""
    return sorted({*vars(sys.modules[package]), *public})
