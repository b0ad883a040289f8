"""``--sweep KEY=V1,V2,...``: cross several settings and summarise each variant in one row."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from loopwarden import ConfigError
from loopwarden.analyze.runner import Totals
from loopwarden.core.config import parse_override


class Variant:
    """One combination of swept settings, as ``--set`` strings and as a display mapping."""

    # A plain record, not a dataclass: one costs about 3.5 M instructions at import, paid by
    # every `loopwarden analyze` (docs/performance.md).
    __slots__ = ("overrides", "settings")

    def __init__(self, overrides: tuple[str, ...], settings: tuple[tuple[str, str], ...]) -> None:
        self.overrides = overrides
        self.settings = settings


def parse_sweeps(specs: Sequence[str]) -> list[Variant]:
    """Expand ``KEY=V1,V2`` specs into their cross product (one variant when there is none).

    Raises :class:`ConfigError` for a spec without ``=`` or without values, or a key given twice.
    """
    axes: list[tuple[str, list[str]]] = []
    for spec in specs:
        key, sep, raw = spec.partition("=")
        key = key.strip()
        values = [value.strip() for value in raw.split(",") if value.strip()]
        if not sep or not key or not values:
            raise ConfigError(
                [f"--sweep {spec!r}: expected KEY=V1,V2,... e.g. criticalThreshold=5,10,20"]
            )
        if any(key == seen for seen, _ in axes):
            raise ConfigError([f"--sweep {key!r} given twice: put all its values in one --sweep"])
        axes.append((key, values))
    if not axes:
        return [Variant((), ())]
    variants = []
    for combo in itertools.product(*(values for _, values in axes)):
        pairs = tuple((key, value) for (key, _), value in zip(axes, combo, strict=True))
        variants.append(Variant(tuple(f"{k}={v}" for k, v in pairs), pairs))
    return variants


def effective_value(config: dict[str, Any], key: str) -> Any:
    """The value a (dotted) key has in the resolved config (what actually ran), or None."""
    value: Any = config
    for part in key.removeprefix("tools.loopDetection.").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def sweep_row(variant: Variant, config: dict[str, Any], totals: Totals) -> dict[str, Any]:
    """One row: the variant's settings as asked and as they ran (clamping can change them:
    ``criticalThreshold`` 5 under a ``warningThreshold`` of 10 runs as 11), its summary and
    where the first blocks fall."""
    import statistics  # decimal and fractions: paid by sweeps only

    positions = totals.first_block_indices
    asked = {key: parse_override(f"{key}={raw}")[1] for key, raw in variant.settings}
    return {
        "settings": asked,
        "effective": {key: effective_value(config, key) for key in asked},
        "config": config,
        "summary": totals.as_dict(),
        # The call (counting from 1) of each trajectory's first block or stop.
        "first_block_or_stop_call": None
        if not positions
        else {
            "min": min(positions) + 1,
            "median": statistics.median(positions) + 1,
            "max": max(positions) + 1,
        },
    }
