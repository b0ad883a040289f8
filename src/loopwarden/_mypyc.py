"""``mypyc_attr`` for modules compiled with mypyc (hatch_build.py), without a runtime dependency.

mypyc reads the decorator from the source and compiles it away; plain Python (the pure build,
and the compiled build's type checker) gets it from here: mypy_extensions' own for type
checkers, a decorator that returns the class unchanged at run time. This module is never
compiled: a compiled module would carry the branch it does not take as unreachable code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
else:

    def mypyc_attr(*_args: object, **_attrs: object) -> object:
        return lambda cls: cls
