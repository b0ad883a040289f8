"""the strict ``tools.loopDetection`` schema (pydantic models), loaded on demand.

Kept out of :mod:`loopwarden.core.config` on purpose: building these models imports pydantic and
compiles its validators, which costs more than the rest of a hook process's start. Only strict
validation (``validate_config``, ``load_config``, ``loopwarden config check``, ``--set``)
imports this module; the lenient runtime path (``resolve_config``) never does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError
from pydantic.functional_validators import BeforeValidator

from loopwarden.core.volatile import pattern_problem, validate_patterns


def _strict_positive(value: object) -> object:
    """Accept integral floats (JSON cannot tell 10 from 10.0); pydantic checks the rest."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


_PositiveInt = Annotated[int, BeforeValidator(_strict_positive), Field(strict=True, gt=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Detectors(_Strict):
    genericRepeat: StrictBool | None = None
    knownPollNoProgress: StrictBool | None = None
    pingPong: StrictBool | None = None
    consecutiveRepeat: StrictBool | None = None
    cycle: StrictBool | None = None
    repeatedError: StrictBool | None = None
    sameOutcome: StrictBool | None = None


def _runnable_pattern(value: object) -> object:
    problem = pattern_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


_Pattern = Annotated[str, BeforeValidator(_runnable_pattern)]


class _ToolPolicy(_Strict):
    poll: StrictBool | None = None
    exempt: StrictBool | None = None
    readOnly: StrictBool | None = None
    failurePattern: _Pattern | None = None
    warningThreshold: _PositiveInt | None = None
    criticalThreshold: _PositiveInt | None = None
    consecutiveWarningThreshold: _PositiveInt | None = None
    consecutiveCriticalThreshold: _PositiveInt | None = None


_NonNegativeInt = Annotated[int, BeforeValidator(_strict_positive), Field(strict=True, ge=0)]
_Period = Annotated[int, BeforeValidator(_strict_positive), Field(strict=True, ge=2)]


class _PostCompactionGuard(_Strict):
    windowSize: _PositiveInt | None = None


class _LoopDetectionBlock(_Strict):
    enabled: StrictBool | None = None
    historySize: _PositiveInt | None = None
    warningThreshold: _PositiveInt | None = None
    criticalThreshold: _PositiveInt | None = None
    unknownToolThreshold: _PositiveInt | None = None
    globalCircuitBreakerThreshold: _PositiveInt | None = None
    detectors: _Detectors | None = None
    postCompactionGuard: _PostCompactionGuard | None = None
    profile: Literal["openclaw", "recommended"] | None = None
    countBlockedCalls: StrictBool | None = None
    stopAfterBlocks: _NonNegativeInt | None = None
    countPendingCalls: StrictBool | None = None
    normalizeVolatile: StrictBool | None = None
    volatilePatterns: list[str] | None = None  # checked by validate_patterns, one path each
    maxCyclePeriod: _Period | None = None
    consecutiveWarningThreshold: _PositiveInt | None = None
    consecutiveCriticalThreshold: _PositiveInt | None = None
    consecutiveSilentThreshold: _PositiveInt | None = None
    consecutiveAnyResultThreshold: _PositiveInt | None = None
    repeatedErrorThreshold: _PositiveInt | None = None
    sameOutcomeThreshold: _PositiveInt | None = None
    toolPolicies: dict[str, _ToolPolicy] | None = None
    toolAnnotations: StrictBool | None = None


def _loc_path(prefix: str, loc: tuple[int | str, ...]) -> str:
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys allowed where the unknown key at ``loc`` stands (``toolPolicies`` holds one
    policy per tool name, so its keys are one level further down)."""
    model: type[BaseModel] = _LoopDetectionBlock
    if len(loc) == 2 and loc[0] in ("detectors", "postCompactionGuard"):
        model = _Detectors if loc[0] == "detectors" else _PostCompactionGuard
    elif len(loc) == 3 and loc[0] == "toolPolicies":
        model = _ToolPolicy
    elif len(loc) != 1:
        return []
    return list(model.model_fields)


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    import difflib

    text = "unknown key (a typo? the keys are listed in README.md, Configuration)"
    close = difflib.get_close_matches(str(loc[-1]), _known_keys(loc), n=1, cutoff=0.6)
    if not close:  # a case slip (readonly) is a near miss whatever its length
        folded = {key.lower(): key for key in _known_keys(loc)}
        close = [folded[str(loc[-1]).lower()]] if str(loc[-1]).lower() in folded else []
    return f"unknown key; did you mean {close[0]}?" if close else text


def _describe(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        return _unknown_key(tuple(error["loc"]))
    if kind == "greater_than":
        return f"must be a positive integer, got {value!r}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be a positive integer, got {type(value).__name__} {value!r}"
    if kind == "bool_type":
        return f"must be true or false, got {type(value).__name__} {value!r}"
    if kind in ("model_type", "dict_type"):
        return f"must be an object, got {type(value).__name__}"
    if kind == "greater_than_equal":
        return f"must be an integer >= {error.get('ctx', {}).get('ge')}, got {value!r}"
    if kind == "literal_error":
        return f"must be one of {error.get('ctx', {}).get('expected')}, got {value!r}"
    if kind == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    return str(error["msg"])


def block_problems(block: object, prefix: str) -> list[str]:
    """Every problem in one ``tools.loopDetection`` block, each prefixed by its dotted path."""
    if not isinstance(block, Mapping):
        return [f"{prefix}: must be an object, got {type(block).__name__}"]
    data = dict(block)
    patterns = data.pop("volatilePatterns", None)
    problems = _pattern_problems(patterns, prefix) if patterns is not None else []
    try:
        _LoopDetectionBlock.model_validate(data)
    except ValidationError as exc:
        return [f"{_loc_path(prefix, e['loc'])}: {_describe(e)}" for e in exc.errors()] + problems
    return problems


def _pattern_problems(patterns: object, prefix: str) -> list[str]:
    """``volatilePatterns`` problems, each at the path of its entry (``...volatilePatterns[0]``)."""
    path = f"{prefix}.volatilePatterns"
    return [
        f"{path}{p}" if p.startswith("[") else f"{path}: {p}" for p in validate_patterns(patterns)
    ]
