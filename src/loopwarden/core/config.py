"""configuration: lenient runtime resolution, strict validation, per-agent merge.

Two entry points on purpose. ``resolve_config`` is what runs next to a live agent: it never raises
and falls back to defaults value by value, exactly as OpenClaw does. ``validate_config`` /
``load_config`` are for humans editing a file: they report every problem at once, each with the
dotted path of the offending field, so a typo never silently becomes a default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

# Import time matters here: a coding-agent hook imports this module on every tool call. The
# strict schema (pydantic, in loopwarden.core._config_schema) and pyjson5 load only when a config is
# validated or read, never for the lenient runtime resolution.

BLOCK_PATH = "tools.loopDetection"

_NUMERIC_DEFAULTS: dict[str, int] = {
    "historySize": 30,
    "warningThreshold": 10,
    "criticalThreshold": 20,
    "unknownToolThreshold": 10,
    "globalCircuitBreakerThreshold": 30,
}
_DETECTOR_KEYS = ("genericRepeat", "knownPollNoProgress", "pingPong")
_DEFAULT_WINDOW = 3

# Profiles are sets of defaults under the user's own keys. "openclaw" is OpenClaw's behaviour,
# byte for byte. "recommended" turns on loopwarden's extensions with thresholds chosen from the
# evaluation in docs/evaluation.md (rerun: python scripts/evaluate_profiles.py).
RECOMMENDED_PROFILE: dict[str, Any] = {
    "enabled": True,
    "warningThreshold": 8,
    "criticalThreshold": 10,
    "globalCircuitBreakerThreshold": 15,
    "unknownToolThreshold": 3,
    "countBlockedCalls": True,
    "stopAfterBlocks": 2,
    "countPendingCalls": True,
    "normalizeVolatile": True,
    "detectors": {
        "consecutiveRepeat": True,
        "cycle": True,
        "repeatedError": True,
        "sameOutcome": True,
    },
    "consecutiveWarningThreshold": 3,
    "consecutiveCriticalThreshold": 3,
    "consecutiveSilentThreshold": 4,
    "consecutiveAnyResultThreshold": 50,
    "repeatedErrorThreshold": 6,
    "sameOutcomeThreshold": 4,
    "maxCyclePeriod": 4,
}
PROFILES: dict[str, dict[str, Any]] = {"openclaw": {}, "recommended": RECOMMENDED_PROFILE}
# No config at all (``LoopGuard()``, an adapter or the proxy given none) runs this profile, so
# that adding loopwarden without reading further ends loops. An explicit block, even ``{}`` or
# ``{"enabled": true}``, keeps OpenClaw's meaning: resolve_config(None) is OpenClaw's defaults.
ZERO_CONFIG_PROFILE = "recommended"


class ConfigError(ValueError):
    """A configuration could not be read or is invalid; ``problems`` lists every issue found."""

    def __init__(self, problems: list[str], source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        where = f"{source}: " if source else ""
        if len(self.problems) == 1:
            text = f"{where}{self.problems[0]}"
        else:
            lines = "\n".join(f"  - {p}" for p in self.problems)
            text = f"{where}{len(self.problems)} configuration problems:\n{lines}"
        super().__init__(text)


@dataclass(frozen=True)
class DetectorSwitches:
    """Which rolling-history detectors are on (`detectors.*`)."""

    generic_repeat: bool = True
    known_poll_no_progress: bool = True
    ping_pong: bool = True
    # loopwarden extensions (off in the default ``openclaw`` profile)
    consecutive_repeat: bool = False
    cycle: bool = False
    repeated_error: bool = False
    same_outcome: bool = False


@dataclass(frozen=True)
class ToolPolicy:
    """A per-tool policy (``toolPolicies.<name>``): what the tool is (a polling tool, a
    read-only one), exempt from loop detection, or its own thresholds.

    ``read_only``: repeating the tool changes nothing, so the warnings that count repeats
    whatever their results count only repeats that made no progress; blocks are unchanged.
    ``failure_pattern``: how the tool's failures look when it has no structured signal (a
    regular expression, run by RE2, searched in the result's text: a match is a failure, no
    match a success), instead of loopwarden's general failure text rules.
    """

    poll: bool = False
    exempt: bool = False
    read_only: bool = False
    failure_pattern: str | None = None
    warning_threshold: int | None = None
    critical_threshold: int | None = None
    consecutive_warning_threshold: int | None = None
    consecutive_critical_threshold: int | None = None

    @property
    def has_thresholds(self) -> bool:
        """Whether the policy sets any threshold of its own."""
        return (
            self.warning_threshold is not None
            or self.critical_threshold is not None
            or self.consecutive_warning_threshold is not None
            or self.consecutive_critical_threshold is not None
        )

    def to_camel(self) -> dict[str, Any]:
        """The policy in camelCase, only the keys that are set."""
        out: dict[str, Any] = {}
        for key, value in (
            ("poll", self.poll),
            ("exempt", self.exempt),
            ("readOnly", self.read_only),
        ):
            if value:
                out[key] = True
        if self.failure_pattern is not None:
            out["failurePattern"] = self.failure_pattern
        for key, number in (
            ("warningThreshold", self.warning_threshold),
            ("criticalThreshold", self.critical_threshold),
            ("consecutiveWarningThreshold", self.consecutive_warning_threshold),
            ("consecutiveCriticalThreshold", self.consecutive_critical_threshold),
        ):
            if number is not None:
                out[key] = number
        return out


@dataclass(frozen=True)
class ResolvedConfig:
    """A fully resolved, clamped ``tools.loopDetection`` block."""

    enabled: bool | None = None
    history_size: int = 30
    warning_threshold: int = 10
    critical_threshold: int = 20
    unknown_tool_threshold: int = 10
    global_circuit_breaker_threshold: int = 30
    detectors: DetectorSwitches = field(default_factory=DetectorSwitches)
    post_compaction_window: int = _DEFAULT_WINDOW
    # loopwarden extensions; the defaults are the OpenClaw behaviour (everything off).
    profile: str = "openclaw"
    count_blocked_calls: bool = False
    stop_after_blocks: int = 0  # 0: never stop, every block is only a block
    # Calls of the current batch still in flight count as repeats (only with a batch given).
    count_pending_calls: bool = False
    normalize_volatile: bool = False
    volatile_patterns: tuple[str, ...] = ()
    max_cycle_period: int = 4
    consecutive_warning_threshold: int = 3
    consecutive_critical_threshold: int = 4
    # For calls whose identical results say nothing (no output); never below the critical one.
    consecutive_silent_threshold: int = 0
    consecutive_any_result_threshold: int = 50
    repeated_error_threshold: int = 6
    # Calls in a row, not all the same, with one outcome that says something: the next is
    # blocked (``detectors.sameOutcome``); the one before it is warned.
    same_outcome_threshold: int = 4
    tool_policies: tuple[tuple[str, ToolPolicy], ...] = ()
    # Whether the MCP proxy derives tool policies from the servers' tool annotations.
    tool_annotations: bool = True

    def policy(self, tool: str) -> ToolPolicy | None:
        """The policy declared for ``tool``, if any (a dict lookup: the proxy may declare one
        per tool of a server)."""
        return self._policies.get(tool) if self.tool_policies else None

    @cached_property
    def _policies(self) -> dict[str, ToolPolicy]:
        # cached_property writes the instance's __dict__ directly, so a frozen dataclass can
        # hold it; it is no field, so equality, hashing and replace() ignore it.
        return dict(self.tool_policies)

    @cached_property
    def _per_tool(self) -> dict[str, ResolvedConfig]:
        return {}

    def for_tool(self, tool: str) -> ResolvedConfig:
        """The config a call of ``tool`` is judged by: this one, with the thresholds of the
        tool's policy if it sets any (built once per tool, then reused)."""
        if not self.tool_policies:
            return self
        config = self._per_tool.get(tool)
        if config is None:
            policy = self._policies.get(tool)
            if policy is None:  # not cached: a model may call any number of made-up names
                return self
            config = _with_policy_thresholds(self, policy)
            self._per_tool[tool] = config
        return config

    @property
    def silent_threshold(self) -> int:
        """``consecutiveSilentThreshold`` as it acts: never below the critical threshold."""
        return max(self.consecutive_silent_threshold, self.consecutive_critical_threshold)

    @property
    def detection_enabled(self) -> bool:
        """Rolling-history detectors run only when ``enabled`` is explicitly true (§1.3)."""
        return self.enabled is True

    @property
    def records_calls(self) -> bool:
        """Calls are recorded unless ``enabled`` is explicitly false (§1.3)."""
        return self.enabled is not False

    @property
    def compaction_guard_enabled(self) -> bool:
        """The post-compaction guard runs unless ``enabled`` is explicitly false (§1.3)."""
        return self.enabled is not False

    def to_camel(self) -> dict[str, Any]:
        """The resolved block in OpenClaw's camelCase shape (``enabled`` omitted when absent)."""
        block: dict[str, Any] = {} if self.enabled is None else {"enabled": self.enabled}
        block.update(
            historySize=self.history_size,
            warningThreshold=self.warning_threshold,
            criticalThreshold=self.critical_threshold,
            unknownToolThreshold=self.unknown_tool_threshold,
            globalCircuitBreakerThreshold=self.global_circuit_breaker_threshold,
            detectors={
                "genericRepeat": self.detectors.generic_repeat,
                "knownPollNoProgress": self.detectors.known_poll_no_progress,
                "pingPong": self.detectors.ping_pong,
                "consecutiveRepeat": self.detectors.consecutive_repeat,
                "cycle": self.detectors.cycle,
                "repeatedError": self.detectors.repeated_error,
                "sameOutcome": self.detectors.same_outcome,
            },
            postCompactionGuard={"windowSize": self.post_compaction_window},
            profile=self.profile,
            countBlockedCalls=self.count_blocked_calls,
            stopAfterBlocks=self.stop_after_blocks,
            countPendingCalls=self.count_pending_calls,
            normalizeVolatile=self.normalize_volatile,
            volatilePatterns=list(self.volatile_patterns),
            maxCyclePeriod=self.max_cycle_period,
            consecutiveWarningThreshold=self.consecutive_warning_threshold,
            consecutiveCriticalThreshold=self.consecutive_critical_threshold,
            consecutiveAnyResultThreshold=self.consecutive_any_result_threshold,
            repeatedErrorThreshold=self.repeated_error_threshold,
            sameOutcomeThreshold=self.same_outcome_threshold,
            toolPolicies={name: p.to_camel() for name, p in self.tool_policies},
            toolAnnotations=self.tool_annotations,
        )
        if self.consecutive_silent_threshold:  # 0: the same as consecutiveCriticalThreshold
            block["consecutiveSilentThreshold"] = self.consecutive_silent_threshold
        return block


# ---------------------------------------------------------------------------------------------
# §1.1 lenient resolution


def _positive_int(value: object, default: int) -> int:
    """Keep ``value`` only if it is a positive integer (integral floats count, bools do not)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value if value > 0 else default
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value > 0:
        return int(value)
    return default


def _flag(block: Mapping[str, Any], key: str) -> bool:
    return block.get(key) is not False


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def resolve_config(raw: Mapping[str, Any] | ResolvedConfig | None) -> ResolvedConfig:
    """Resolve a ``tools.loopDetection`` block leniently; never raises."""
    if isinstance(raw, ResolvedConfig):
        return raw
    block = with_profile_defaults(_mapping(raw))
    num = {key: _positive_int(block.get(key), dflt) for key, dflt in _NUMERIC_DEFAULTS.items()}
    warning, critical, breaker = (
        num["warningThreshold"],
        num["criticalThreshold"],
        num["globalCircuitBreakerThreshold"],
    )
    if critical <= warning:
        critical = warning + 1
    if breaker <= critical:
        breaker = critical + 1
    enabled = block.get("enabled")
    detectors = _mapping(block.get("detectors"))
    guard = _mapping(block.get("postCompactionGuard"))
    return ResolvedConfig(
        enabled=enabled if isinstance(enabled, bool) else None,
        history_size=num["historySize"],
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=num["unknownToolThreshold"],
        global_circuit_breaker_threshold=breaker,
        detectors=DetectorSwitches(
            generic_repeat=_flag(detectors, "genericRepeat"),
            known_poll_no_progress=_flag(detectors, "knownPollNoProgress"),
            ping_pong=_flag(detectors, "pingPong"),
            consecutive_repeat=detectors.get("consecutiveRepeat") is True,
            cycle=detectors.get("cycle") is True,
            repeated_error=detectors.get("repeatedError") is True,
            same_outcome=detectors.get("sameOutcome") is True,
        ),
        post_compaction_window=_positive_int(guard.get("windowSize"), _DEFAULT_WINDOW),
        **_resolve_extensions(block),
    )


def with_thresholds(
    config: ResolvedConfig, warning: int | None, critical: int | None
) -> ResolvedConfig:
    """``config`` with its own warning/critical thresholds (a tool policy), clamped as in §1.1.

    A threshold given wins over the one inherited from ``config``: a critical threshold at or
    below the inherited warning one lowers that to just below it (``{"criticalThreshold": 5}``
    blocks at 5 whatever the block's ``warningThreshold``); both given out of order, the
    critical one is raised above the warning one, as for the block itself.
    """
    if critical and not warning and critical <= config.warning_threshold:
        warning = max(1, critical - 1)
    warning = warning or config.warning_threshold
    critical = critical or config.critical_threshold
    if critical <= warning:
        critical = warning + 1
    breaker = max(config.global_circuit_breaker_threshold, critical + 1)
    return replace(
        config,
        warning_threshold=warning,
        critical_threshold=critical,
        global_circuit_breaker_threshold=breaker,
    )


def _with_policy_thresholds(config: ResolvedConfig, policy: ToolPolicy) -> ResolvedConfig:
    """``config`` with the thresholds ``policy`` sets (clamped as in §1.1), or ``config``."""
    if not policy.has_thresholds:
        return config
    adjusted = with_thresholds(config, policy.warning_threshold, policy.critical_threshold)
    return replace(
        adjusted,
        consecutive_warning_threshold=policy.consecutive_warning_threshold
        or config.consecutive_warning_threshold,
        consecutive_critical_threshold=policy.consecutive_critical_threshold
        or config.consecutive_critical_threshold,
    )


def with_tool_policies(
    config: ResolvedConfig, policies: Mapping[str, ToolPolicy]
) -> ResolvedConfig:
    """``config`` plus ``policies`` for the tools it has no policy of its own for: an entry the
    user wrote (even an empty one) always wins over one derived elsewhere (tool annotations)."""
    own = {name for name, _ in config.tool_policies}
    added = tuple((name, p) for name, p in policies.items() if name not in own)
    return replace(config, tool_policies=config.tool_policies + added) if added else config


def with_profile_defaults(block: Mapping[str, Any]) -> Mapping[str, Any]:
    """Overlay the block on its profile's defaults (the user's own keys always win)."""
    profile = block.get("profile")
    defaults = PROFILES.get(profile) if isinstance(profile, str) else None
    if not defaults:
        return block
    return _overlay(defaults, block)


def _non_negative_int(value: object, default: int) -> int:
    return 0 if value == 0 and not isinstance(value, bool) else _positive_int(value, default)


def _resolve_policy(raw: object) -> ToolPolicy | None:
    if not isinstance(raw, Mapping):
        return None
    return ToolPolicy(
        poll=raw.get("poll") is True,
        exempt=raw.get("exempt") is True,
        read_only=raw.get("readOnly") is True,
        failure_pattern=_resolve_failure_pattern(raw.get("failurePattern")),
        warning_threshold=_positive_int(raw.get("warningThreshold"), 0) or None,
        critical_threshold=_positive_int(raw.get("criticalThreshold"), 0) or None,
        consecutive_warning_threshold=_positive_int(raw.get("consecutiveWarningThreshold"), 0)
        or None,
        consecutive_critical_threshold=_positive_int(raw.get("consecutiveCriticalThreshold"), 0)
        or None,
    )


def _resolve_failure_pattern(pattern: object) -> str | None:
    """A valid ``failurePattern``; an invalid one is dropped (and logged), never run."""
    if pattern is None:
        return None
    from loopwarden.core.volatile import safe_patterns

    kept = safe_patterns([pattern], f"{BLOCK_PATH}.toolPolicies.*.failurePattern")
    return kept[0] if kept else None


def _resolve_extensions(block: Mapping[str, Any]) -> dict[str, Any]:
    """The loopwarden extension fields; anything invalid falls back to the OpenClaw behaviour."""
    base = ResolvedConfig
    profile = block.get("profile")
    patterns = block.get("volatilePatterns")
    policies = _mapping(block.get("toolPolicies"))
    return {
        "profile": profile if isinstance(profile, str) and profile in PROFILES else "openclaw",
        "count_blocked_calls": block.get("countBlockedCalls") is True,
        "stop_after_blocks": _non_negative_int(block.get("stopAfterBlocks"), 0),
        "count_pending_calls": block.get("countPendingCalls") is True,
        "normalize_volatile": block.get("normalizeVolatile") is True,
        "volatile_patterns": _resolve_patterns(patterns),
        "max_cycle_period": max(2, _positive_int(block.get("maxCyclePeriod"), 4)),
        "consecutive_warning_threshold": _positive_int(
            block.get("consecutiveWarningThreshold"), base.consecutive_warning_threshold
        ),
        "consecutive_critical_threshold": _positive_int(
            block.get("consecutiveCriticalThreshold"), base.consecutive_critical_threshold
        ),
        "consecutive_silent_threshold": _positive_int(
            block.get("consecutiveSilentThreshold"), base.consecutive_silent_threshold
        ),
        "consecutive_any_result_threshold": _positive_int(
            block.get("consecutiveAnyResultThreshold"), base.consecutive_any_result_threshold
        ),
        "repeated_error_threshold": _positive_int(
            block.get("repeatedErrorThreshold"), base.repeated_error_threshold
        ),
        "same_outcome_threshold": _positive_int(
            block.get("sameOutcomeThreshold"), base.same_outcome_threshold
        ),
        "tool_policies": tuple(
            (name, policy)
            for name, policy in ((n, _resolve_policy(p)) for n, p in policies.items())
            if isinstance(name, str) and policy is not None
        ),
        "tool_annotations": block.get("toolAnnotations") is not False,
    }


def _resolve_patterns(patterns: object) -> tuple[str, ...]:
    """The valid, safe ``volatilePatterns``; an unsafe one is dropped (and logged), never run."""
    if not isinstance(patterns, list) or not patterns:
        return ()
    from loopwarden.core.volatile import safe_patterns

    return safe_patterns(patterns, BLOCK_PATH)


# ---------------------------------------------------------------------------------------------
# §1.4 per-agent merge


def is_full_config(raw: Mapping[str, Any]) -> bool:
    """A whole OpenClaw config has ``tools`` or ``agents``; anything else is a bare block."""
    return "tools" in raw or "agents" in raw


def _global_block(full: Mapping[str, Any]) -> Mapping[str, Any] | None:
    block = _mapping(full.get("tools")).get("loopDetection")
    return block if isinstance(block, Mapping) else None


def _agent_block(full: Mapping[str, Any], agent_id: str | None) -> Mapping[str, Any] | None:
    if agent_id is None:
        return None
    agents = _mapping(full.get("agents")).get("list")
    for entry in agents if isinstance(agents, list) else []:
        if isinstance(entry, Mapping) and entry.get("id") == agent_id:
            block = _mapping(entry.get("tools")).get("loopDetection")
            return block if isinstance(block, Mapping) else None
    return None


def _overlay(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        # toolPolicies (an extension) merges tool by tool, so an agent's block adds to or
        # replaces the global block's entries one tool at a time, as it does detectors.
        nested = key in ("detectors", "postCompactionGuard", "toolPolicies")
        if nested and isinstance(below, Mapping) and isinstance(value, Mapping):
            merged[key] = {**below, **value}
        else:
            merged[key] = value
    return merged


def effective_config(full_config: Mapping[str, Any], agent_id: str | None) -> dict[str, Any]:
    """The merged ``tools.loopDetection`` block for one agent, before resolution."""
    base = _global_block(full_config)
    agent = _agent_block(full_config, agent_id)
    if agent is None:
        return dict(base) if base is not None else {}
    if base is None:
        return dict(agent)
    return _overlay(base, agent)


def agent_ids(full_config: Mapping[str, Any]) -> list[str]:
    """The ids of the agents listed in a whole OpenClaw config, in file order."""
    agents = _mapping(full_config.get("agents")).get("list")
    entries = agents if isinstance(agents, list) else []
    return [e["id"] for e in entries if isinstance(e, Mapping) and isinstance(e.get("id"), str)]


# ---------------------------------------------------------------------------------------------
# §1.2 strict validation


# The fast path of strict validation. pydantic (loopwarden.core._config_schema) is the one authority
# on what is valid, but importing it and building the schema costs ~100 ms: too much for a hook
# process that reads its config file on every tool call. A block made only of plainly valid
# values (known keys; exact ints in range, bools, the known profiles, compiling patterns) is
# valid without asking; anything else, valid or not, goes to the schema, which then also words
# the errors. tests/test_fast_start.py checks that this never accepts what the schema refuses.

_Check = Callable[[object], bool]
_MAX_PLAIN_INT = 2**53


def _plain_int(minimum: int) -> _Check:
    return lambda v: v is None or (type(v) is int and minimum <= v <= _MAX_PLAIN_INT)


def _plain_bool(value: object) -> bool:
    return value is None or type(value) is bool


def _plain_object(checks: Mapping[str, _Check], *, nullable: bool = True) -> _Check:
    def check(value: object) -> bool:
        if value is None:
            return nullable
        return type(value) is dict and all(
            key in checks and checks[key](item) for key, item in value.items()
        )

    return check


def _plain_pattern(value: object) -> bool:
    if type(value) is not str:
        return False
    from loopwarden.core.volatile import pattern_problem

    return pattern_problem(value) is None


def _plain_patterns(value: object) -> bool:
    if value is None:
        return True
    if type(value) is not list or not all(type(p) is str for p in value):
        return False
    from loopwarden.core.volatile import validate_patterns

    return not validate_patterns(value)


_PLAIN_POLICY = _plain_object(
    {
        "poll": _plain_bool,
        "exempt": _plain_bool,
        "readOnly": _plain_bool,
        "failurePattern": _plain_pattern,
        "warningThreshold": _plain_int(1),
        "criticalThreshold": _plain_int(1),
        "consecutiveWarningThreshold": _plain_int(1),
        "consecutiveCriticalThreshold": _plain_int(1),
    },
    nullable=False,  # a policy is an object; null is refused
)


def _plain_policies(value: object) -> bool:
    if value is None:
        return True
    return type(value) is dict and all(
        type(k) is str and _PLAIN_POLICY(p) for k, p in value.items()
    )


_PLAIN_BLOCK: dict[str, _Check] = {
    "enabled": _plain_bool,
    **{key: _plain_int(1) for key in _NUMERIC_DEFAULTS},
    "detectors": _plain_object(
        {
            key: _plain_bool
            for key in (
                *_DETECTOR_KEYS,
                "consecutiveRepeat",
                "cycle",
                "repeatedError",
                "sameOutcome",
            )
        }
    ),
    "postCompactionGuard": _plain_object({"windowSize": _plain_int(1)}),
    "profile": lambda v: v is None or (type(v) is str and v in PROFILES),
    "countBlockedCalls": _plain_bool,
    "stopAfterBlocks": _plain_int(0),
    "countPendingCalls": _plain_bool,
    "normalizeVolatile": _plain_bool,
    "volatilePatterns": _plain_patterns,
    "maxCyclePeriod": _plain_int(2),
    "consecutiveWarningThreshold": _plain_int(1),
    "consecutiveCriticalThreshold": _plain_int(1),
    "consecutiveSilentThreshold": _plain_int(1),
    "consecutiveAnyResultThreshold": _plain_int(1),
    "repeatedErrorThreshold": _plain_int(1),
    "sameOutcomeThreshold": _plain_int(1),
    "toolPolicies": _plain_policies,
    "toolAnnotations": _plain_bool,
}


def plainly_valid(block: object) -> bool:
    """True when a ``tools.loopDetection`` block is surely valid, without pydantic.

    False means "not sure": ask the strict schema (``validate_config`` does).
    """
    return isinstance(block, Mapping) and all(
        key in _PLAIN_BLOCK and _PLAIN_BLOCK[key](value) for key, value in block.items()
    )


def _block_problems(block: object, prefix: str) -> list[str]:
    if plainly_valid(block):
        return []
    from loopwarden.core._config_schema import block_problems  # pydantic: only when not sure

    return block_problems(block, prefix)


def _policy_notices(resolved: ResolvedConfig, where: str) -> list[str]:
    """A tool policy whose own warning and critical thresholds are out of order."""
    notices = []
    for name, policy in resolved.tool_policies:
        warning, critical = policy.warning_threshold, policy.critical_threshold
        if warning is not None and critical is not None and critical <= warning:
            notices.append(
                f"{where}: toolPolicies.{name}: criticalThreshold {critical} is not above "
                f"warningThreshold {warning}; runtime uses criticalThreshold {warning + 1} "
                "for that tool"
            )
    return notices


def _clamp_notices(block: Mapping[str, Any], where: str) -> list[str]:
    """Say how runtime clamping adjusts out-of-order thresholds (these are not errors)."""
    merged = with_profile_defaults(block)
    resolved = resolve_config(block)

    def given(key: str) -> str:
        if key in block:
            return str(block[key])
        if key in merged:
            return f"{merged[key]} (from profile {block.get('profile')!r})"
        return f"{_NUMERIC_DEFAULTS[key]} (default)"

    notices = _policy_notices(resolved, where)
    if resolved.critical_threshold != _positive_int(
        merged.get("criticalThreshold"), _NUMERIC_DEFAULTS["criticalThreshold"]
    ):
        notices.append(
            f"{where}: criticalThreshold {given('criticalThreshold')} is not above "
            f"warningThreshold {resolved.warning_threshold}; runtime uses criticalThreshold "
            f"{resolved.critical_threshold}"
        )
    if resolved.global_circuit_breaker_threshold != _positive_int(
        merged.get("globalCircuitBreakerThreshold"),
        _NUMERIC_DEFAULTS["globalCircuitBreakerThreshold"],
    ):
        notices.append(
            f"{where}: globalCircuitBreakerThreshold {given('globalCircuitBreakerThreshold')} "
            f"is not above criticalThreshold {resolved.critical_threshold}; runtime uses "
            f"globalCircuitBreakerThreshold {resolved.global_circuit_breaker_threshold}"
        )
    return notices


@dataclass(frozen=True)
class ValidatedConfig:
    """A whole OpenClaw config that passed strict validation, with its clamping notices."""

    full: Mapping[str, Any]
    notices: tuple[str, ...] = ()
    source: str | None = None

    def block(self, agent_id: str | None = None) -> dict[str, Any]:
        """The effective (merged, unresolved) block for ``agent_id``."""
        return effective_config(self.full, agent_id)

    def resolve(self, agent_id: str | None = None) -> ResolvedConfig:
        """The resolved config for ``agent_id`` (or the global block)."""
        return resolve_config(self.block(agent_id))

    @property
    def agent_ids(self) -> list[str]:
        """The agents listed in the config."""
        return agent_ids(self.full)


def _placement_problems(container: Mapping[str, Any], where: str) -> list[str]:
    """A block or block keys put where runtime never reads them: a misspelt ``loopDetection``
    (``tools.loopDetecton``), a ``loopDetection`` outside ``tools``, or block keys such as
    ``criticalThreshold`` directly in the config or in ``tools``."""
    import difflib

    prefix = f"{where}." if where else ""
    problems = []
    if "loopDetection" in container:
        problems.append(
            f"{prefix}loopDetection: the block belongs under tools: move it to {prefix}{BLOCK_PATH}"
        )
    tools = container.get("tools")
    if isinstance(tools, Mapping):
        names = [key for key in tools if isinstance(key, str) and key != "loopDetection"]
        for typo in difflib.get_close_matches("loopDetection", names, n=3, cutoff=0.8):
            problems.append(f"{prefix}tools.{typo}: unknown block; did you mean {BLOCK_PATH}?")
        problems += _stray_keys(tools, f"{prefix}tools", f"{prefix}{BLOCK_PATH}")
    problems += _stray_keys(container, where, f"{prefix}{BLOCK_PATH}")
    return problems


# The top-level containers loopwarden reads, and the key each holds that it reads.
_CONTAINERS = {"agents": "list", "tools": "loopDetection"}


def _misspelt_containers(full: Mapping[str, Any]) -> list[str]:
    """A near-miss of ``agents`` or ``tools`` at the top level (``agent: {list: [...]}``) that
    holds what loopwarden reads there: runtime would ignore it, so it is an error. Other
    top-level keys are left alone: an OpenClaw config has many that loopwarden does not read."""
    import difflib

    problems = []
    names = [key for key in full if isinstance(key, str) and key not in _CONTAINERS]
    for container, inner in _CONTAINERS.items():
        for typo in difflib.get_close_matches(container, names, n=3, cutoff=0.8):
            value = full[typo]
            if isinstance(value, Mapping) and inner in value:
                problems.append(
                    f"{typo}: unknown key; did you mean {container}? (runtime reads "
                    f"{container}.{inner} only)"
                )
    return problems


def _stray_keys(container: Mapping[str, Any], where: str, block: str) -> list[str]:
    """Distinctive block keys (thresholds and the like) found in ``container``, not its block."""
    prefix = f"{where}." if where else ""
    return [
        f"{prefix}{key}: a {BLOCK_PATH} key outside its block, which runtime ignores; move it "
        f"into {block}"
        for key in container
        if key in _PLAIN_BLOCK and key not in _GENERIC_KEYS
    ]


# Block keys generic enough to mean something else elsewhere in an OpenClaw config.
_GENERIC_KEYS = frozenset({"enabled", "profile", "detectors"})


def _shape_problems(full: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, Any]]]:
    """Check the containers around the blocks; return problems and (path, block) pairs."""
    problems: list[str] = _placement_problems(full, "") + _misspelt_containers(full)
    blocks: list[tuple[str, Any]] = []
    tools = full.get("tools")
    if tools is not None and not isinstance(tools, Mapping):
        problems.append(f"tools: must be an object, got {type(tools).__name__}")
    elif isinstance(tools, Mapping) and "loopDetection" in tools:
        blocks.append((BLOCK_PATH, tools["loopDetection"]))
    agents = full.get("agents")
    if agents is not None and not isinstance(agents, Mapping):
        problems.append(f"agents: must be an object, got {type(agents).__name__}")
        return problems, blocks
    entries = _mapping(agents).get("list")
    if entries is None:
        return problems, blocks
    if not isinstance(entries, list):
        return [*problems, f"agents.list: must be an array, got {type(entries).__name__}"], blocks
    for i, entry in enumerate(entries):
        where = f"agents.list[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: must be an object, got {type(entry).__name__}")
            continue
        if "id" in entry and not isinstance(entry["id"], str):
            problems.append(f"{where}.id: must be a string, got {type(entry['id']).__name__}")
        problems += _placement_problems(entry, where)
        agent_tools = entry.get("tools")
        if agent_tools is not None and not isinstance(agent_tools, Mapping):
            problems.append(f"{where}.tools: must be an object, got {type(agent_tools).__name__}")
        elif isinstance(agent_tools, Mapping) and "loopDetection" in agent_tools:
            blocks.append((f"{where}.{BLOCK_PATH}", agent_tools["loopDetection"]))
    return problems, blocks


def _validated_notices(full: Mapping[str, Any], paths: list[str]) -> list[str]:
    """Clamping notices on what runtime actually uses: the global block and each agent's merge."""
    if not paths:
        return [f"no {BLOCK_PATH} block found: the defaults apply"]
    notices = []
    base = _global_block(full)
    if BLOCK_PATH in paths:
        notices.extend(_clamp_notices(effective_config(full, None), BLOCK_PATH))
    for agent, block in _agent_blocks(full).items():
        # One pass over agents.list: looking each agent up again was quadratic in their number.
        merged = dict(block) if base is None else _overlay(base, block)
        where = f"agent {agent!r} (global block merged with its own)"
        notices.extend(_clamp_notices(merged, where))
    return notices


def _agent_blocks(full: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Each agent's own block, by id; the first entry of an id wins, as in ``_agent_block``."""
    agents = _mapping(full.get("agents")).get("list")
    first: dict[str, Mapping[str, Any] | None] = {}
    for entry in agents if isinstance(agents, list) else []:
        if isinstance(entry, Mapping) and isinstance(entry.get("id"), str):
            block = _mapping(entry.get("tools")).get("loopDetection")
            first.setdefault(entry["id"], block if isinstance(block, Mapping) else None)
    return {agent: block for agent, block in first.items() if block is not None}


def validate_config(
    raw: Mapping[str, Any], *, source: str | None = None, whole: bool | None = None
) -> ValidatedConfig:
    """Strictly validate a whole OpenClaw config or a bare block.

    ``whole`` says whether ``raw`` is a whole OpenClaw config (True) or a bare
    ``tools.loopDetection`` block (False); by default a dict with a ``tools`` or ``agents`` key is
    taken as a whole config. Raises :class:`ConfigError` listing every problem with its dotted
    path; threshold-order violations are returned as ``notices`` instead, since runtime clamping
    handles them.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError([f"the config must be an object, got {type(raw).__name__}"], source)
    if _exceeds_depth(raw):  # before anything recursive (pydantic, repr) sees the value
        raise ConfigError([_too_deep_problem()], source)
    if whole is None:
        whole = is_full_config(raw)
    full: Mapping[str, Any] = raw if whole else {"tools": {"loopDetection": raw}}
    problems, blocks = _shape_problems(full)
    for path, block in blocks:
        problems.extend(_block_problems(block, path))
    if problems:
        raise ConfigError(problems, source)
    notices = _validated_notices(full, [path for path, _ in blocks])
    return ValidatedConfig(full=full, notices=tuple(notices), source=source)


# Limits on a config file, both far above any real config (a few KB, nested under 10 levels):
# past them the file is refused with a clear error instead of parsing for minutes (a 4 MB JSON5
# file took 89 s) or overflowing the parsers' recursion (a 200k-deep file).
MAX_CONFIG_BYTES = 1 << 20  # 1 MiB
MAX_CONFIG_DEPTH = 100


def _too_deep_problem() -> str:
    return (
        f"values nested deeper than {MAX_CONFIG_DEPTH} levels (the limit for a config file): "
        "is this the right file?"
    )


_LEAVES = frozenset({str, int, float, bool, type(None)})


def _exceeds_depth(value: object, limit: int = MAX_CONFIG_DEPTH) -> bool:
    """True when arrays/objects in ``value`` nest deeper than ``limit`` (iteratively)."""
    if not isinstance(value, (Mapping, list, tuple)):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        for child in item.values() if isinstance(item, Mapping) else item:
            # JSON leaves are most of a config: skip them before the slower ABC checks.
            if type(child) not in _LEAVES and isinstance(child, (Mapping, list, tuple)):
                stack.append((child, depth + 1))
    return False


def load_config(path: str | Path) -> ValidatedConfig:
    """Read and strictly validate an OpenClaw config file (JSON5 or JSON).

    The file is a whole OpenClaw config, or a bare ``tools.loopDetection`` block (an object
    with block keys and neither ``tools`` nor ``agents``), exactly as the same content given as
    a dict. A missing file, a file over :data:`MAX_CONFIG_BYTES` or nested deeper than
    :data:`MAX_CONFIG_DEPTH`, a syntax error (with line and column), a wrong shape or a block
    put where runtime never reads it each raise one :class:`ConfigError` with a clear message.
    """
    raw = read_config_file(path)
    whole = not (isinstance(raw, Mapping) and looks_like_block(raw))
    return validate_config(raw, source=str(path), whole=whole)


def looks_like_block(raw: Mapping[str, Any]) -> bool:
    """True when a config without ``tools`` or ``agents`` holds ``tools.loopDetection`` keys:
    it is a bare block. (A whole config with neither, such as one that only sets models, is
    not.)"""
    return not is_full_config(raw) and any(key in _PLAIN_BLOCK for key in raw)


def _read_text(path: str | Path, source: str) -> str:
    """The file's text, refused past :data:`MAX_CONFIG_BYTES` before anything is parsed."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_CONFIG_BYTES + 1)
            if len(data) > MAX_CONFIG_BYTES:
                import os

                size = os.fstat(file.fileno()).st_size
                raise ConfigError([_too_big_problem(size)], source)
        return data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(["file not found"], source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"cannot read the file: {exc}"], source) from None


def _too_big_problem(size: int) -> str:
    got = f"{size:,} bytes" if size > MAX_CONFIG_BYTES else "more than that"
    return (
        f"the file is larger than the 1 MiB a config file may have ({MAX_CONFIG_BYTES:,} bytes; "
        f"this one: {got}); a loop-detection config is a few KB: is this the right file?"
    )


def read_config_file(path: str | Path) -> Any:
    """A config file's value (JSON5 or JSON), unvalidated; every problem a :class:`ConfigError`.

    Refused past :data:`MAX_CONFIG_BYTES` or :data:`MAX_CONFIG_DEPTH`, before or while parsing.
    """
    source = str(path)
    return _parse_json5(_read_text(path, source), source)


def _parse_json5(text: str, source: str) -> Any:
    """Parse a config file's text; a syntax error is a :class:`ConfigError` with its position.

    Plain JSON goes to the stdlib parser (C), anything else to pyjson5 (C, via Cython): a 50 KB
    hand-written JSON5 config takes milliseconds, where the pure-Python json5 took a second.
    """
    import json

    try:
        return json.loads(text)  # JSON is JSON5 with the same values
    except RecursionError:
        raise ConfigError([_too_deep_problem()], source) from None
    except ValueError:
        pass
    import pyjson5

    try:
        return pyjson5.decode(text, maxdepth=MAX_CONFIG_DEPTH)
    except pyjson5.Json5NestingTooDeep:
        raise ConfigError([_too_deep_problem()], source) from None
    except pyjson5.Json5DecoderException as exc:
        raise ConfigError([_json5_problem(text, exc)], source) from None
    except RecursionError:
        raise ConfigError([_too_deep_problem()], source) from None


# pyjson5 says where as "near N" (1-based), names tokens as bytes (b'comma') and characters
# as code points (U+007d).
_NEAR = re.compile(r"\s*(?:starting )?near (\d+)")
_TOKEN_NAME = re.compile(r"b'([^']*)'")
_CODE_POINT = re.compile(r"U\+([0-9a-fA-F]{4,6})")


def _json5_problem(text: str, exc: Exception) -> str:
    message = str(exc.args[0] if exc.args else exc)
    near = _NEAR.search(message)
    message = _TOKEN_NAME.sub(r"'\1'", _NEAR.sub("", message, count=1))
    message = _CODE_POINT.sub(lambda m: repr(chr(int(m.group(1), 16))), message)
    if near is None:
        return f"syntax error: {message}"
    return _located_problem(text, max(0, int(near.group(1)) - 1), message)


def _located_problem(text: str, offset: int, message: str) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - text.rfind("\n", 0, offset)
    return f"syntax error at line {line}, column {column}: {message}"


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split a ``--set KEY=VALUE`` into a key path and a JSON5 value (bare words stay strings).

    Here, not with the command line, because the analyzer's sweeps parse the same settings.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError([f"--set {text!r}: expected KEY=VALUE, e.g. criticalThreshold=5"])
    if key.startswith(BLOCK_PATH + "."):
        key = key[len(BLOCK_PATH) + 1 :]
    return key.split("."), _parse_value(raw)


def _parse_value(raw: str) -> Any:
    """A ``--set`` value: JSON5, or the bare word itself."""
    import json

    try:  # JSON is JSON5 with the same values; the stdlib parser spares a hook loading pyjson5
        return json.loads(raw)
    except ValueError:
        pass
    import pyjson5

    try:
        return pyjson5.decode(raw, maxdepth=100)
    except (pyjson5.Json5Exception, RecursionError):
        return raw
