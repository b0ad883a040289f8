"""A session store in Redis, so many worker processes share one history per session.

A gateway that sends the tool calls of one session to different workers must keep the history
in one place, or loops slip through. :class:`RedisStore` keeps each session under keys sharing a
hash tag (``lw:{session}:h`` — the history, a list of JSON records, oldest first — and
``lw:{session}:m`` — a hash with the version token and the rest of the session as JSON), so
Redis Cluster keeps them on one node and a Lua script can touch both atomically.

Each ``update(key, fn)`` is optimistic: ``fn`` runs on a local copy of the session (cached from
the last round trip), then one Lua script checks the version token and, if nothing changed in
between, applies the difference — drop the trimmed records, attach outcomes in place, append new
records, write the rest if it changed, refresh the idle TTL — in one round trip. If another worker
wrote first, the script answers with the current state instead and ``fn`` runs again on it. So
every decision is computed on the state it commits, and N workers give exactly the verdicts one
process gives for the same interleaved sequence of calls.

:class:`AsyncRedisStore` is the same store on ``redis.asyncio`` for code on an event loop
(``LoopGuard``'s ``a*`` methods): the same Lua scripts, keys and JSON, so sync and async
workers share one Redis and one history per session. Both run one update as the same
sans-I/O plan (:meth:`_RedisCore._update_plan`, a generator that yields each script call it
needs and receives the reply), driven by a blocking client or awaited on an async one.

When Redis cannot be reached the store raises :class:`StoreUnavailableError` carrying the
``on_store_error`` policy (``"allow"`` by default); socket timeouts bound every attempt, and
messages never contain credentials.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from loopwarden.core._lazylog import quiet_unless_configured
from loopwarden.core.tool_call import ToolCallRecord
from loopwarden.store import (
    GuardSession,
    record_to_dict,
    restore_session,
    session_state_from_records,
    snapshot_session,
)
from loopwarden.stores import OnStoreError, StoreUnavailableError, check_on_store_error

logger = logging.getLogger("loopwarden.stores.redis")
quiet_unless_configured()

_T = TypeVar("_T")

_JSON_MEMO_SIZE = 20_000
_SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel")
_SECRET_QUERY = re.compile(r"(?i)([?&][^=&]*(?:password|secret|token)[^=&]*=)[^&]*")
# Greedy up to the last '@' of the authority: a password may hold an unencoded '@'.
_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/?#\s]*@")
_SCHEME_TEXT = re.compile(r"(?i)[a-z][a-z0-9+.-]{0,30}")
_ENCODE_HINT = (
    "percent-encode the user name and password: '/' as %2F, '?' as %3F, '#' as %23, "
    "'@' as %40 and '%' as %25 (in Python: urllib.parse.quote(password, safe=''))"
)

# KEYS: history list, meta hash. ARGV: expected token, new token, ttl ms, drop count, meta JSON
# ('' = unchanged), number of in-place sets n, then n (index, record) pairs, then appended records.
# On a token mismatch nothing is written and the current state is returned for a retry.
_UPDATE_LUA = """
local current = redis.call('HGET', KEYS[2], 'v') or ''
if current ~= ARGV[1] then
  return {0, current, redis.call('HGET', KEYS[2], 'meta') or '',
          redis.call('LRANGE', KEYS[1], 0, -1)}
end
local drop = tonumber(ARGV[4])
if drop > 0 then redis.call('LTRIM', KEYS[1], drop, -1) end
local nsets = tonumber(ARGV[6])
local i = 7
for _ = 1, nsets do
  redis.call('LSET', KEYS[1], tonumber(ARGV[i]), ARGV[i + 1])
  i = i + 2
end
while i <= #ARGV do  -- in chunks: unpack() of thousands of values overflows Lua's stack
  local last = math.min(i + 999, #ARGV)
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, last))
  i = last + 1
end
redis.call('HSET', KEYS[2], 'v', ARGV[2])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[2], 'meta', ARGV[5]) end
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return {1}
"""

_READ_LUA = """
return {redis.call('HGET', KEYS[2], 'v') or '', redis.call('HGET', KEYS[2], 'meta') or '',
        redis.call('LRANGE', KEYS[1], 0, -1)}
"""


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def redact_url(url: str) -> str:
    """The URL with user, password and password-like query values replaced by ``***``."""
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub(r"\1***@", url))


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _encode_key(session: str) -> str:
    """The session as it appears inside the hash tag: braces and ``%`` escaped, never empty."""
    if not session:
        return "%"  # a bare % cannot come from the escaping below
    key = session.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    if not key.isascii() and _SURROGATE.search(key):
        # A lone surrogate cannot be sent as UTF-8: written %uDCxx, which no escaped text
        # holds (every % of the name became %25), so distinct names keep distinct keys.
        key = _SURROGATE.sub(lambda m: f"%u{ord(m.group()):04X}", key)
    return key


@dataclass(frozen=True)
class _Entry:
    """One session as last seen in Redis: version token, meta JSON, history records JSON."""

    token: str
    meta: str
    history: tuple[str, ...]


_EMPTY = _Entry("", "", ())


@dataclass(frozen=True)
class _Plan:
    """How to turn the stored history into the new one: drop, set in place, append."""

    drop: int
    sets: tuple[tuple[int, str], ...]
    appends: tuple[str, ...]

    @property
    def cost(self) -> int:
        return len(self.sets) + len(self.appends)


def _plan_for(old: Sequence[str], new: Sequence[str], drop: int) -> _Plan:
    kept = len(old) - drop
    sets = tuple((i, new[i]) for i in range(kept) if new[i] != old[drop + i])
    return _Plan(drop, sets, tuple(new[kept:]))


def _plan_history(old: Sequence[str], new: Sequence[str]) -> _Plan:
    """The cheapest of a few candidate plans; correct whatever the change was.

    The guard only appends, trims the oldest and fills outcomes in place, so the right plan is
    nearly always among "drop 0, 1, 2 or the length difference"; dropping everything is the
    always-correct fallback.
    """
    candidates = {0, 1, 2, len(old) - len(new), len(old) - len(new) + 1, len(old)}
    best: _Plan | None = None
    for drop in sorted(candidates):
        if 0 <= drop <= len(old) and len(old) - drop <= len(new):
            plan = _plan_for(old, new, drop)
            if best is None or plan.cost < best.cost:
                best = plan
    assert best is not None  # drop == len(old) always qualifies
    return best


# A script call an update needs: (0 = update script, 1 = read script, keys, args).
_Request = tuple[int, tuple[str, str], list[Any]]

# Between conflicting attempts an update waits a random time up to a bound that doubles from
# _BACKOFF_FIRST to _BACKOFF_MAX seconds ("full jitter"). Without it two busy workers can keep
# invalidating each other's attempt in lockstep until one gives up; with it one of them soon
# commits while the other waits. The first retry is immediate: most conflicts are one-off.
_BACKOFF_FIRST = 0.0005
_BACKOFF_MAX = 0.02


def _backoff(conflicts: int) -> float:
    """Seconds to wait after the given number of conflicts in a row (0 after the first)."""
    if conflicts < 2:
        return 0.0
    return random.uniform(0.0, min(_BACKOFF_MAX, _BACKOFF_FIRST * 2 ** (conflicts - 2)))


class _Breaker:
    """The circuit breaker of one store: after ``failures_to_open`` failures in a row (timeouts,
    refused connections), calls are refused at once instead of each waiting for its own
    timeout, and one call every ``probe_every`` seconds tries Redis again. Why: a hung server
    (SIGSTOP, a full network buffer) costs a socket timeout per operation, two per tool call,
    for as long as it lasts. Plain state; the store holds its lock around each method."""

    def __init__(self, failures_to_open: int, probe_every: float) -> None:
        self.failures_to_open = failures_to_open
        self.probe_every = probe_every
        self.failures = 0  # in a row; 0 while Redis answers
        self.refused = 0  # calls refused at once during this outage
        self.since = 0.0  # when this outage began (the first failure)
        self.next_probe = 0.0
        self.last = ""  # the latest failure's message

    def refuse(self, now: float) -> str | None:
        """Why a call is refused at once, or None when it may try Redis (maybe as the probe)."""
        if self.failures < self.failures_to_open:
            return None
        if now >= self.next_probe:
            self.next_probe = now + self.probe_every  # this call probes; the others do not wait
            return None
        self.refused += 1
        return (
            f"{self.last} (Redis has failed {self.failures} times in a row for "
            f"{now - self.since:.1f} s; the call was not tried: the next try is in "
            f"{self.next_probe - now:.1f} s)"
        )

    def failed(self, now: float, message: str) -> bool:
        """Count a failure; True for the first of an outage (the one that is logged)."""
        self.failures += 1
        self.last = message
        if self.failures == 1:
            self.since = now
        if self.failures >= self.failures_to_open:
            self.next_probe = max(self.next_probe, now + self.probe_every)
        return self.failures == 1

    def recovered(self, now: float) -> tuple[float, int, int] | None:
        """Close the breaker; (outage seconds, failed calls, refused calls) if there was one."""
        if not self.failures:
            return None
        outage = (now - self.since, self.failures, self.refused)
        self.failures = self.refused = 0
        self.next_probe = 0.0
        return outage


class _RedisCore:
    """What the sync and async Redis stores share: options, keys, the local cache, the JSON
    encoding and the update as a plan of script calls; everything but the client."""

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "lw",
        session_ttl: float | None = 3600.0,
        on_store_error: OnStoreError = "allow",
        timeout: float = 1.0,
        max_attempts: int = 100,
        cache_size: int = 1024,
        breaker_failures: int = 3,
        breaker_probe_every: float = 5.0,
    ) -> None:
        name = type(self).__name__
        if (url is None) == (client is None):
            raise ValueError(f"{name} needs exactly one of url= (a redis:// URL) or client=")
        if session_ttl is not None and session_ttl <= 0:
            raise ValueError(f"session_ttl must be positive seconds or None, got {session_ttl}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout}")
        if max_attempts < 1 or cache_size < 0:
            raise ValueError("max_attempts must be at least 1 and cache_size at least 0")
        if breaker_failures < 1 or breaker_probe_every <= 0:
            raise ValueError(
                "breaker_failures must be at least 1 and breaker_probe_every positive seconds"
            )
        if "{" in prefix or "}" in prefix:
            raise ValueError(f"prefix must not contain braces (they mark the hash tag): {prefix!r}")
        self.on_store_error = check_on_store_error(on_store_error)
        self.prefix = prefix
        self.session_ttl = session_ttl
        self.timeout = timeout
        self._url = url
        if url is not None:
            _check_url(url)  # once, here: a malformed URL must not fail (and leak) per call
        self._where = redact_url(url) if url is not None else "the given Redis client"
        self._secrets = _secrets_of(url) if url is not None else ()
        self._client_obj: Any = client
        self._scripts: tuple[Any, Any] | None = None
        self._max_attempts = max_attempts
        self._cache_size = cache_size
        # session -> (last committed state, its live object or None while a caller holds it)
        self._cache: OrderedDict[str, tuple[_Entry, GuardSession | None]] = OrderedDict()
        self._json_memo: dict[tuple[Any, ...], str] = {}
        # Guards the cache for O(1) dict operations only, never across I/O.
        self._lock = threading.Lock()
        self._breaker = _Breaker(breaker_failures, breaker_probe_every)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._where!r}, prefix={self.prefix!r})"

    # -- keys --------------------------------------------------------------------------------

    def keys_for(self, session: str) -> tuple[str, str]:
        """The Redis keys of a session: (history list, meta hash); they share one hash tag."""
        base = f"{self.prefix}:{{{_encode_key(session)}}}"
        return f"{base}:h", f"{base}:m"

    def clear_cache(self) -> None:
        """Forget the local copies (the next update reads from Redis)."""
        with self._lock:
            self._cache.clear()

    # -- one update, as the script calls it needs --------------------------------------------

    def _update_plan(
        self, key: str, fn: Callable[[GuardSession], _T]
    ) -> Generator[_Request | float, Any, _T]:
        """One optimistic update: yields each script call, receives its reply, returns fn's.

        ``fn`` runs on the cached (or freshly read) session; the update script commits the
        difference if the version token is still the one read, else answers with the
        current state and ``fn`` runs again on it, after a pause (a float: seconds to wait)
        once conflicts repeat.
        """
        keys = self.keys_for(key)
        entry, session = self._take(key)
        for attempt in range(self._max_attempts):
            pause = _backoff(attempt)
            if pause:
                yield pause
            if entry is None:
                entry = _entry_of((yield (1, keys, [])))
            if session is None:
                session = self._restore(key, entry)
            result = fn(session)
            meta, history = self._encode(session)
            plan = _plan_history(entry.history, history)
            token = os.urandom(8).hex()
            args: list[Any] = [entry.token, token, self._ttl_ms(), plan.drop]
            args += ["" if meta == entry.meta else meta, len(plan.sets)]
            for index, record in plan.sets:
                args += [index, record]
            args += plan.appends
            reply = yield (0, keys, args)
            if int(reply[0]) == 1:
                self._keep(key, _Entry(token, meta, history), session)
                return result
            # Another worker wrote first: run fn again on the state it left.
            entry = _entry_of(reply[1:])
            session = None
        raise StoreUnavailableError(
            f"Redis store at {self._where}: session {key!r} kept changing under "
            f"{self._max_attempts} attempts; giving up on this call",
            policy=self.on_store_error,
        )

    def _peeked(self, key: str, reply: Any) -> GuardSession | None:
        entry = _entry_of(reply)
        return None if not entry.token else self._restore(key, entry)

    # -- internals ---------------------------------------------------------------------------

    def _ttl_ms(self) -> int:
        return 0 if self.session_ttl is None else max(1, round(self.session_ttl * 1000))

    def _take(self, key: str) -> tuple[_Entry | None, GuardSession | None]:
        """The last committed state of a session, if cached, and its live object.

        The live object is handed to one caller at a time (taken out of the cache), so two
        threads (or tasks) never run ``fn`` on the same object; the other one restores a copy.
        """
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                return None, None
            entry, session = cached
            self._cache[key] = (entry, None)
            self._cache.move_to_end(key)
            return entry, session

    def _keep(self, key: str, entry: _Entry, session: GuardSession) -> None:
        if self._cache_size == 0:
            return
        with self._lock:
            self._cache[key] = (entry, session)
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def _encode(self, session: GuardSession) -> tuple[str, tuple[str, ...]]:
        """The session as (meta JSON, one JSON string per history record)."""
        # The meta is everything but the history: snapshot a history-less shallow copy.
        bare = replace(session, state=session_state_from_records(()))
        meta = _dumps(snapshot_session(bare))
        history = tuple(self._record_json(record) for record in session.state.history)
        return meta, history

    def _record_json(self, record: ToolCallRecord) -> str:
        # Records rarely change between calls: memoise their JSON by value.
        data = record_to_dict(record)
        key = tuple(data.values())
        text = self._json_memo.get(key)
        if text is None:
            if len(self._json_memo) >= _JSON_MEMO_SIZE:
                self._json_memo.clear()
            text = self._json_memo[key] = _dumps(data)
        return text

    def _restore(self, key: str, entry: _Entry) -> GuardSession:
        if not entry.meta:
            session = GuardSession(key)
            if not entry.history:
                return session
            data = snapshot_session(session)
        else:
            data = json.loads(entry.meta)
        data["history"] = [json.loads(record) for record in entry.history]
        return restore_session(data)

    def _bad_url(self, exc: Exception) -> StoreUnavailableError:
        # redis-py's URL errors quote the text they could not parse, which can be the
        # password: report a store failure with the text scrubbed, never a traceback.
        return StoreUnavailableError(
            self._scrub(f"Redis store at {self._where}: bad URL: {exc}"),
            policy=self.on_store_error,
        )

    def _admit(self) -> None:
        """Before a Redis action: while the breaker is open, refuse it at once (no wait for a
        timeout) unless it is the one probe allowed every ``breaker_probe_every`` seconds."""
        with self._lock:
            refused = self._breaker.refuse(time.monotonic())
        if refused is not None:
            raise StoreUnavailableError(refused, policy=self.on_store_error, reported=True)

    def _failure(self, exc: Exception) -> StoreUnavailableError:
        """A Redis failure as a credential-free StoreUnavailableError (logged once per outage)."""
        message = self._scrub(f"Redis store at {self._where}: {type(exc).__name__}: {exc}")
        with self._lock:
            first = self._breaker.failed(time.monotonic(), message)
        if first:
            breaker = self._breaker
            logger.error(
                "%s (on_store_error=%s; after %d failures in a row each call is decided at "
                "once, and Redis is tried again every %g s; this outage is logged once)",
                message,
                self.on_store_error,
                breaker.failures_to_open,
                breaker.probe_every,
            )
        return StoreUnavailableError(message, policy=self.on_store_error, reported=True)

    def _recovered(self) -> None:
        if not self._breaker.failures:
            return  # the common case: no lock taken
        with self._lock:
            outage = self._breaker.recovered(time.monotonic())
        if outage is not None:
            seconds, failed, refused = outage
            logger.warning(
                "Redis store at %s is reachable again after an outage of %.1f s (%d calls "
                "failed, %d more were decided at once without trying Redis)",
                self._where,
                seconds,
                failed,
                refused,
            )

    def _scrub(self, text: str) -> str:
        text = redact_url(text)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


class RedisStore(_RedisCore):
    """Guard sessions in Redis, shared by every worker that uses the same URL and prefix.

    ``url``: ``redis://[user:password@]host:port/db``, ``rediss://`` (TLS), ``unix://path``,
    ``redis+cluster://host:port`` (Redis Cluster), or
    ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]`` (Sentinel; the
    credentials are the data nodes', ``?sentinel_password=`` the sentinels'). Or pass a ready
    redis-py ``client``. ``session_ttl``: idle sessions expire after this many seconds (None:
    never). ``timeout``: socket connect/read timeout of each attempt, in seconds.
    ``on_store_error``: ``"allow"`` or ``"block"`` when Redis cannot be reached.

    Every call is a blocking round trip; on an event loop use :class:`AsyncRedisStore`
    (same keys and scripts: both may serve one Redis at once).
    """

    # -- the SessionStore protocol -----------------------------------------------------------

    def update(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        """Apply ``fn`` to the session atomically across all workers (``fn`` may run again)."""
        plan = self._update_plan(key, fn)
        reply: Any = None
        try:
            while True:
                request = plan.send(reply)
                if isinstance(request, float):
                    time.sleep(request)
                    reply = None
                else:
                    reply = self._call(partial(self._run_script, *request))
        except StopIteration as done:
            result: _T = done.value
            return result

    def peek(self, key: str) -> GuardSession | None:
        """A read-only copy of the session as stored now, or None when there is none."""
        return self._peeked(key, self._call(partial(self._run_script, 1, self.keys_for(key), [])))

    def __len__(self) -> int:
        """How many sessions are stored under this prefix (a SCAN; for diagnostics)."""
        pattern = f"{_glob_escape(self.prefix)}:{{*}}:m"
        return self._call(lambda: sum(1 for _ in self._client().scan_iter(match=pattern)))

    def close(self) -> None:
        """Close the connections (the store reconnects if used again)."""
        client = self._client_obj
        if client is not None and self._url is not None:
            client.close()
            self._client_obj = None
            self._scripts = None

    # -- internals ---------------------------------------------------------------------------

    def _client(self) -> Any:
        if self._client_obj is None:
            assert self._url is not None
            try:
                self._client_obj = _connect(self._url, self.timeout)
            except (ValueError, TypeError) as exc:
                raise self._bad_url(exc) from None
        return self._client_obj

    def _run_script(self, which: int, keys: tuple[str, str], args: list[Any]) -> Any:
        # redis-py's Script runs EVALSHA and reloads the script after a server restart.
        return self._load_scripts()[which](keys=list(keys), args=args)

    def _load_scripts(self) -> tuple[Any, Any]:
        if self._scripts is None:
            client = self._client()
            self._scripts = (client.register_script(_UPDATE_LUA), client.register_script(_READ_LUA))
        return self._scripts

    def _call(self, action: Callable[[], _T]) -> _T:
        """Run one Redis action; any failure becomes a credential-free StoreUnavailableError."""
        self._admit()
        try:
            result = action()
        except Exception as exc:
            if not _is_redis_failure(exc):
                raise
            raise self._failure(exc) from None
        self._recovered()
        return result


class AsyncRedisStore(_RedisCore):
    """:class:`RedisStore` on ``redis.asyncio``: no call blocks the event loop.

    The same options, keys, Lua scripts and JSON as :class:`RedisStore`, so sync and async
    workers can share one Redis (and one history per session). Give it to ``LoopGuard`` and
    call the guard's async methods (``abefore_tool_call`` ...); its sync methods refuse an
    async-only store. ``client``: a ready ``redis.asyncio`` client (you own it and close it).
    Built from a URL, the store keeps one client per event loop (a ``redis.asyncio``
    connection belongs to the loop that opened it); ``await store.aclose()`` closes it.

    Tasks of one loop updating the same session take turns (an ``asyncio.Lock`` per session
    in use): only other workers' writes can conflict, so a burst of concurrent calls in one
    session (a model turn's parallel tool calls) costs no retries and starves no task.
    """

    def __init__(self, url: str | None = None, **options: Any) -> None:
        super().__init__(url, **options)
        self._client_loop: Any = None
        # session -> (its lock, tasks using it); the locks of the loop in _locks_loop only.
        self._session_locks: dict[str, list[Any]] = {}
        self._locks_loop: Any = None

    # -- the AsyncSessionStore protocol ------------------------------------------------------

    async def aupdate(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        """Apply ``fn`` to the session atomically across all workers (``fn`` may run again)."""
        entry = self._session_lock(key)
        entry[1] += 1
        try:
            async with entry[0]:
                return await self._aupdate(key, fn)
        finally:
            entry[1] -= 1
            if entry[1] == 0 and self._session_locks.get(key) is entry:
                del self._session_locks[key]

    async def _aupdate(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        import asyncio

        plan = self._update_plan(key, fn)
        reply: Any = None
        try:
            while True:
                request = plan.send(reply)
                if isinstance(request, float):
                    await asyncio.sleep(request)
                    reply = None
                else:
                    reply = await self._acall(self._arun_script(*request))
        except StopIteration as done:
            result: _T = done.value
            return result

    def _session_lock(self, key: str) -> list[Any]:
        """[asyncio.Lock, users] of a session on the running loop (created on first use)."""
        import asyncio

        loop = asyncio.get_running_loop()
        if self._locks_loop is not loop:  # locks of a finished loop are of no use here
            self._session_locks, self._locks_loop = {}, loop
        entry = self._session_locks.get(key)
        if entry is None:
            entry = self._session_locks[key] = [asyncio.Lock(), 0]
        return entry

    async def apeek(self, key: str) -> GuardSession | None:
        """A read-only copy of the session as stored now, or None when there is none."""
        return self._peeked(key, await self._acall(self._arun_script(1, self.keys_for(key), [])))

    async def alen(self) -> int:
        """How many sessions are stored under this prefix (a SCAN; for diagnostics)."""
        pattern = f"{_glob_escape(self.prefix)}:{{*}}:m"

        async def count() -> int:
            return sum([1 async for _ in self._aclient().scan_iter(match=pattern)])

        return await self._acall(count())

    async def aclose(self) -> None:
        """Close the connections of a client built from the URL (reopened if used again)."""
        client = self._client_obj
        if client is not None and self._url is not None:
            self._client_obj = None
            self._scripts = None
            await client.aclose()

    # -- internals ---------------------------------------------------------------------------

    def _aclient(self) -> Any:
        if self._url is None:
            return self._client_obj
        import asyncio

        loop = asyncio.get_running_loop()
        if self._client_obj is None or self._client_loop is not loop:
            # A client of a loop that is gone (an earlier asyncio.run) cannot be reused or
            # closed from here: its sockets close with it.
            try:
                self._client_obj = _aconnect(self._url, self.timeout)
            except (ValueError, TypeError) as exc:
                raise self._bad_url(exc) from None
            self._client_loop = loop
            self._scripts = None
        return self._client_obj

    async def _arun_script(self, which: int, keys: tuple[str, str], args: list[Any]) -> Any:
        client = self._aclient()
        if self._scripts is None:
            self._scripts = (client.register_script(_UPDATE_LUA), client.register_script(_READ_LUA))
        return await self._scripts[which](keys=list(keys), args=args)

    async def _acall(self, action: Coroutine[Any, Any, _T]) -> _T:
        """Await one Redis action; any failure becomes a credential-free StoreUnavailableError."""
        try:
            self._admit()
        except StoreUnavailableError:
            action.close()  # never started: no "coroutine was never awaited" warning
            raise
        try:
            result = await action
        except Exception as exc:
            if not _is_redis_failure(exc):
                raise
            raise self._failure(exc) from None
        self._recovered()
        return result


def _entry_of(reply: Any) -> _Entry:
    """A read script reply (token, meta, history) as an entry."""
    return _Entry(_text(reply[0]), _text(reply[1]), tuple(_text(r) for r in reply[2]))


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _is_redis_failure(exc: BaseException) -> bool:
    """Redis errors and socket-level failures (anything else is a bug and propagates)."""
    from redis.exceptions import RedisClusterException, RedisError

    return isinstance(exc, (RedisError, RedisClusterException, OSError))


def _secrets_of(url: str) -> tuple[str, ...]:
    """The literal secrets in a URL (user, password, password-like query values)."""
    parts = urlsplit(url)
    secrets = [parts.password, parts.username]
    for name, value in parse_qsl(parts.query):
        if re.search(r"(?i)password|secret|token", name):
            secrets.append(value)
    found = {s for s in secrets if s}
    found |= {unquote(s) for s in found}
    # Longest first, so a password containing the user name is replaced whole.
    return tuple(sorted((s for s in found if len(s) >= 3), key=len, reverse=True))


def _check_url(url: str) -> None:
    """Refuse a URL redis-py would misread, saying what is wrong but never quoting a secret.

    An unencoded '/', '?' or '#' in a password ends the host part early, so redis-py reads the
    password as the port and its error (and a naive redaction) would show it.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME_TEXT.fullmatch(scheme) or scheme.lower() not in _SCHEMES:
        shown = repr(scheme.lower()) if sep and _SCHEME_TEXT.fullmatch(scheme) else "(none)"
        raise ValueError(
            f"Redis URL: unsupported scheme {shown}; use one of "
            + ", ".join(f"{s}://" for s in _SCHEMES)
        )
    scheme = scheme.lower()
    if "#" in rest:
        raise ValueError(
            f"Redis URL {scheme}://...: it contains a '#', which ends a URL (Redis URLs have no "
            f"fragment), so it is likely part of the password; {_ENCODE_HINT}"
        )
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    if "@" in rest[end:]:
        raise ValueError(
            f"Redis URL {scheme}://...: an '@' comes after a '/' or '?', so the user name or "
            f"password holds an unencoded '/' or '?' (or a query value holds an '@'); "
            f"{_ENCODE_HINT}"
        )
    # From here on the secrets sit before the last '@' of the host part: redaction is safe.
    where = redact_url(url)
    if scheme == "unix":
        return
    parts = urlsplit(url)
    if scheme == "redis+sentinel":
        _sentinel_hosts(url)
        _sentinel_path(url)
        return
    try:
        port = parts.port  # redis-py's own error here quotes the text: it may be a password
    except ValueError:
        port = -1
    if port is not None and not 0 < port < 65536:
        raise ValueError(
            f"Redis URL {where}: the port after the host must be a number from 1 to 65535; "
            f"if a password precedes it, {_ENCODE_HINT}"
        )
    if parts.path not in ("", "/") and not re.fullmatch(r"/\d+/?", parts.path):
        raise ValueError(f"Redis URL {where}: the path must be a database number, e.g. /0")


def _sentinel_hosts(url: str) -> list[tuple[str, int]]:
    """The sentinels of a ``redis+sentinel://`` URL, as (host, port)."""
    hosts = urlsplit(url).netloc.rpartition("@")[2]
    sentinels: list[tuple[str, int]] = []
    for item in hosts.split(","):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"Redis URL {redact_url(url)}: sentinel {item!r} is not host:port")
        sentinels.append((host.strip("[]"), int(port)))
    return sentinels


def _sentinel_path(url: str) -> list[str]:
    """The service name and optional database number of a ``redis+sentinel://`` URL."""
    path = [p for p in urlsplit(url).path.split("/") if p]
    if not path:
        raise ValueError(f"Redis URL {redact_url(url)}: name the service, e.g. .../mymaster")
    if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ValueError(
            f"Redis URL {redact_url(url)}: the path must be /service or /service/db, "
            "e.g. /mymaster/0"
        )
    return path


def _client_options(timeout: float, retry: Any) -> dict[str, Any]:
    """The options both clients get: bounded timeouts and ``retry``.

    One immediate retry survives a server restart (a stale pooled connection) without turning
    an outage into a long stall: redis-py's own default backs off for seconds.
    """
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": retry,
        "health_check_interval": 0,
    }


def _cluster_url(url: str, scheme: str, options: dict[str, Any]) -> str:
    """The plain URL a cluster client takes (``redis+cluster://`` → ``redis://``); cluster
    clients have no health-check option, so it is dropped from ``options``."""
    options.pop("health_check_interval")
    return url.replace(scheme, scheme.split("+")[0], 1)


def _connect(url: str, timeout: float) -> Any:
    """A redis-py client for the URL, with bounded timeouts and one quick reconnect retry."""
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError as exc:
        raise ImportError(
            "RedisStore needs redis-py: "
            f"pip install '.[redis]' from loopwarden's repository root ({exc})"
        ) from None
    options = _client_options(timeout, Retry(NoBackoff(), 1))
    scheme = urlsplit(url).scheme.lower()
    if scheme.endswith("+cluster"):
        from redis.cluster import RedisCluster

        plain = _cluster_url(url, scheme, options)
        return _wrap_connect(url, lambda: RedisCluster.from_url(plain, **options))
    if scheme == "redis+sentinel":
        return _wrap_connect(url, lambda: _sentinel_client(url, options))
    return redis.Redis.from_url(url, **options)


def _aconnect(url: str, timeout: float) -> Any:
    """A ``redis.asyncio`` client for the URL, with the options of :func:`_connect`."""
    try:
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry as AsyncRetry
        from redis.backoff import NoBackoff
    except ImportError as exc:
        raise ImportError(
            "AsyncRedisStore needs redis-py: "
            f"pip install '.[redis]' from loopwarden's repository root ({exc})"
        ) from None
    options = _client_options(timeout, AsyncRetry(NoBackoff(), 1))
    scheme = urlsplit(url).scheme.lower()
    if scheme.endswith("+cluster"):
        from redis.asyncio.cluster import RedisCluster

        plain = _cluster_url(url, scheme, options)
        # The async cluster client learns the slots on first use, not at construction.
        return RedisCluster.from_url(plain, **options)
    if scheme == "redis+sentinel":
        return _sentinel_client(url, options, asynchronous=True)
    return aioredis.Redis.from_url(url, **options)


def _wrap_connect(url: str, build: Callable[[], Any]) -> Any:
    """Build a client that talks to the server at construction, without leaking secrets."""
    try:
        return build()
    except Exception as exc:
        if not _is_redis_failure(exc):
            raise
        text = redact_url(f"Redis at {redact_url(url)}: {type(exc).__name__}: {exc}")
        for secret in _secrets_of(url):
            text = text.replace(secret, "***")
        raise StoreUnavailableError(text) from None


def _sentinel_client(url: str, options: dict[str, Any], *, asynchronous: bool = False) -> Any:
    sentinel_cls: Any  # redis-py leaves Sentinel unannotated
    if asynchronous:
        from redis.asyncio.sentinel import Sentinel as sentinel_cls
    else:
        from redis.sentinel import Sentinel as sentinel_cls

    parts = urlsplit(url)
    sentinels = _sentinel_hosts(url)
    path = _sentinel_path(url)
    query = dict(parse_qsl(parts.query))
    node = dict(options)
    if parts.username:
        node["username"] = unquote(parts.username)
    if parts.password:
        node["password"] = unquote(parts.password)
    if len(path) > 1:
        node["db"] = int(path[1])
    sentinel_kwargs: dict[str, Any] = {
        "socket_timeout": options["socket_timeout"],
        "socket_connect_timeout": options["socket_connect_timeout"],
        "retry": options["retry"],
    }
    if "sentinel_password" in query:
        sentinel_kwargs["password"] = query["sentinel_password"]
    sentinel = sentinel_cls(sentinels, sentinel_kwargs=sentinel_kwargs, **node)
    return sentinel.master_for(path[0], **node)


__all__ = ["AsyncRedisStore", "RedisStore", "StoreUnavailableError", "redact_url"]
