#!/usr/bin/env python3
"""A Tock worker in Python, standard library only (Python 3.11+).

It speaks the worker half of Tock's HTTP API (docs/workers-any-language.md):

- claim:     POST /v1/leases, long-polling (`wait_ms`), one `claim_id` per claim so that a claim
             retried after a connection error gets the same runs back instead of new ones;
- heartbeat: POST /v1/workers/{id}/heartbeat, every lease held renewed in one request at a third
             of the lease; a run the answer names in `lost` is dropped (its handler is told to stop
             and its result is never sent);
- complete:  POST /v1/runs/complete, results sent in batches; each entry has its own outcome
             (`done`, or `lost` / `not_found` / `conflict`: nothing written, the result dropped);
- release:   POST /v1/runs/{id}/release on shutdown, for runs that did not finish in the grace
             period (no attempt spent), then DELETE /v1/workers/{id}.

The invariant it keeps: every write carries the run's lease token, and a write the server refused
for the lease (409 `lease_lost`, or a batch entry `lost`) is never retried: the run belongs to
someone else now. Connection errors, 5xx and 429 are retried with a bounded backoff (429 and 503
after their Retry-After), so the worker rides out a server restart; 401 and 403 stop it with exit
code 2, since a refused key does not heal by retrying.

Run it with `python3 worker.py --help`; README.md beside this file shows it against `tock dev`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import random
import signal
import socket
import sys
import threading
import time
import traceback
import urllib.parse
import uuid
from datetime import datetime, timezone
from typing import Any, Callable

# ---------------------------------------------------------------------------------------------
# Handlers: the work itself. Each takes a Context and returns the run's output (a string, or any
# JSON value, sent as JSON text; None sends none). Raising PermanentError dead-letters the run at
# once; RetryableError (or any other exception) fails this attempt, retried with the job's backoff
# until it has spent max_attempts.
# ---------------------------------------------------------------------------------------------


class PermanentError(Exception):
    """A failure that retrying cannot fix: the run goes to the dead-letter list now."""


class RetryableError(Exception):
    """A failure worth retrying, optionally not before `retry_after_ms`."""

    def __init__(self, message: str, retry_after_ms: int | None = None):
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class Context:
    """What a handler knows about its run. `cancelled` is set when the worker stops waiting for it
    (the lease was lost, the run timed out, or the shutdown grace is over): a long handler should
    check it and return early, since its result will not be recorded."""

    def __init__(self, run: dict[str, Any], cancelled: threading.Event):
        self.run_id: str = run["run_id"]
        self.job_id: str = run["job_id"]
        self.attempt: int = run["attempt"]
        self.max_attempts: int = run["max_attempts"]
        self.scheduled_for: str = run["scheduled_for"]
        self.payload: Any = run.get("payload")
        self.cancelled = cancelled


def echo(ctx: Context) -> Any:
    """Returns the payload: its output is the payload (a string as is, anything else as JSON)."""
    return ctx.payload


def sleep(ctx: Context) -> str:
    """Sleeps `payload.seconds` (default 1), returning early when cancelled."""
    seconds = float((ctx.payload or {}).get("seconds", 1))
    if ctx.cancelled.wait(seconds):
        raise RetryableError("cancelled")
    return f"slept {seconds:g}s"


def fail(ctx: Context) -> None:
    """Fails permanently: the run is dead at once, whatever its max_attempts."""
    raise PermanentError((ctx.payload or {}).get("message", "failed on purpose"))


def flaky(ctx: Context) -> str:
    """Fails (retryably) until attempt `payload.succeed_on` (default 2), asking for a retry after
    `payload.retry_after_ms` (default 500)."""
    p = ctx.payload or {}
    if ctx.attempt < int(p.get("succeed_on", 2)):
        raise RetryableError(f"flaky on attempt {ctx.attempt}", int(p.get("retry_after_ms", 500)))
    return f"succeeded on attempt {ctx.attempt}"


HANDLERS: dict[str, Callable[[Context], Any]] = {"echo": echo, "sleep": sleep, "fail": fail, "flaky": flaky}

# ---------------------------------------------------------------------------------------------
# Limits of the API (docs/http-api.md) and of this worker.
# ---------------------------------------------------------------------------------------------

MAX_RESULTS = 500  # entries per POST /v1/runs/complete
MAX_HEARTBEAT = 1000  # leases per POST /v1/workers/{id}/heartbeat
MAX_CLAIM = 500  # `max` of POST /v1/leases
MAX_OUTPUT = 1_048_576  # characters of `output` (the server keeps the last 64 KiB)
MAX_ERROR = 65_536  # characters of `error` and of `error_stack`
BACKOFF_FIRST_S = 0.2  # first pause after a connection error, 5xx or 429 without Retry-After
BACKOFF_CAP_S = 5.0  # longest pause between two tries
RETRY_AFTER_CAP_S = 30.0  # a Retry-After longer than this is cut to it
COMPLETE_LINGER_S = 0.02  # how long the completer waits for more results before sending a batch
LEASE_FRACTION = 3  # renew at a third of the lease: two renewals may fail before it lapses


# ---------------------------------------------------------------------------------------------
# Logging: one line per event, text for people or JSON for machines (`--log-format json`).
# ---------------------------------------------------------------------------------------------

_log_lock = threading.RLock()  # re-entrant: a signal handler logs, maybe while its thread was logging
_log_json = False


def log(level: str, msg: str, **fields: Any) -> None:
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    with _log_lock:
        if _log_json:
            print(json.dumps({"time": now, "level": level, "msg": msg, **fields}), flush=True)
        else:
            extra = " ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in fields.items())
            print(f"{now} {level:5} {msg}{' ' + extra if extra else ''}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# HTTP: one persistent connection per thread, retries for what a retry can fix.
# ---------------------------------------------------------------------------------------------


class KeyRefused(Exception):
    """401 or 403: the key is wrong, revoked, or lacks the `worker` role. The worker stops."""


class Unavailable(Exception):
    """The server could not be reached (or kept answering 5xx/429) before the caller gave up."""


class Answer:
    def __init__(self, status: int, body: Any):
        self.status = status
        self.body = body

    @property
    def code(self) -> str | None:
        err = self.body.get("error") if isinstance(self.body, dict) else None
        return err.get("code") if isinstance(err, dict) else None

    @property
    def message(self) -> str:
        err = self.body.get("error") if isinstance(self.body, dict) else None
        return str(err.get("message")) if isinstance(err, dict) else str(self.body)[:200]


class Api:
    """Tock's HTTP API. `call` retries connection errors, 5xx and 429 with a bounded backoff until
    `give_up` (an Event) is set or `deadline` (time.monotonic()) passes; 401/403 raise KeyRefused;
    any other answer is returned for the caller to read."""

    def __init__(self, url: str, key: str | None):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {url}")
        self.https = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")
        self.headers = {"content-type": "application/json", "accept": "application/json"}
        if key:
            self.headers["authorization"] = f"Bearer {key}"
        self._conns: dict[int, http.client.HTTPConnection] = {}
        self._lock = threading.Lock()

    def _conn(self, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        ident = threading.get_ident()
        with self._lock:
            conn = self._conns.get(ident)
            reused = conn is not None and conn.sock is not None
            if conn is None:
                cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
                conn = cls(self.host, self.port, timeout=timeout)
                self._conns[ident] = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn, reused

    def _drop(self) -> None:
        with self._lock:
            conn = self._conns.pop(threading.get_ident(), None)
        if conn is not None:
            conn.close()

    def interrupt(self, thread: threading.Thread) -> None:
        """Cuts the connection `thread` is waiting on (a long-poll, at shutdown). The server gives
        the runs of a claim whose client went away back at once."""
        with self._lock:
            conn = self._conns.get(thread.ident or -1)
            sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def once(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> tuple[Answer, dict]:
        """One request. Raises OSError / http.client.HTTPException on a connection error."""
        data = None if body is None else json.dumps(body).encode()
        conn, _ = self._conn(timeout)
        try:
            conn.request(method, self.prefix + path, body=data, headers=self.headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException):
            self._drop()
            raise
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return Answer(resp.status, parsed), {k.lower(): v for k, v in resp.getheaders()}

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float = 30.0,
        give_up: threading.Event | None = None,
        deadline: float | None = None,
    ) -> Answer:
        pause = BACKOFF_FIRST_S
        tries = 0
        while True:
            tries += 1
            _, reused = self._conn(timeout)
            retry_after: float | None = None
            try:
                answer, headers = self.once(method, path, body, timeout)
            except (OSError, http.client.HTTPException) as err:
                if give_up is not None and give_up.is_set():
                    raise Unavailable(f"{method} {path}: {type(err).__name__} (stopping)") from err
                # A kept-alive connection the server closed while idle fails its next request:
                # that one is retried at once, without counting as an outage.
                if reused and tries == 1:
                    continue
                problem = f"{type(err).__name__}: {err}"
            else:
                if answer.status in (401, 403):
                    raise KeyRefused(f"{answer.status} {answer.code}: {answer.message}")
                if answer.status != 429 and answer.status < 500:
                    return answer
                problem = f"{answer.status} {answer.code or ''}".strip()
                retry_after = _retry_after(headers.get("retry-after"))
            wait = retry_after if retry_after is not None else random.uniform(pause / 2, pause)
            pause = min(pause * 2, BACKOFF_CAP_S)
            if deadline is not None and time.monotonic() + wait > deadline:
                raise Unavailable(f"{method} {path}: {problem} (gave up)")
            if tries in (1, 4) or tries % 20 == 0:
                log("warn", "request failed; retrying", request=f"{method} {path}", error=problem, tries=tries)
            if give_up is not None:
                if give_up.wait(wait):
                    raise Unavailable(f"{method} {path}: {problem} (stopping)")
            else:
                time.sleep(wait)


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), RETRY_AFTER_CAP_S)
    except ValueError:
        return None  # an HTTP-date: the ordinary backoff will do


def _instant(text: str) -> float:
    """An RFC 3339 instant as epoch seconds."""
    return datetime.fromisoformat(text).timestamp()


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---------------------------------------------------------------------------------------------
# The worker.
# ---------------------------------------------------------------------------------------------


class Held:
    """A run this worker holds a lease on, from its claim until its result is answered."""

    def __init__(self, run: dict[str, Any], lease_s: float):
        self.run = run
        self.run_id: str = run["run_id"]
        self.token: str = run["lease_token"]
        self.lease_s = lease_s
        self.cancelled = threading.Event()
        self.started_at: float | None = None  # local epoch seconds, once the handler started
        self.finished = False  # the handler's result is decided (or the run dropped): ignore the rest


class Worker:
    def __init__(self, cfg: argparse.Namespace, api: Api):
        self.cfg = cfg
        self.api = api
        self.handlers = {name: HANDLERS[name] for name in cfg.handlers}
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # a run ended, or results were answered
        self.held: dict[str, Held] = {}
        self.todo: queue.Queue[Held | None] = queue.Queue()
        self.results: list[dict[str, Any]] = []
        self.sending = 0  # results in a request now
        self.stopping = threading.Event()  # no more claims; handlers finish within the grace
        self.closed = threading.Event()  # heartbeats and the completer end
        self.wake = threading.Event()  # the main thread has something to do
        self.refused: str | None = None  # why the key was refused, once it was
        self.exit_code = 0
        self.offset_s = 0.0  # the server's clock minus ours
        self.batch = True  # the server has POST /v1/runs/complete
        self.threads: dict[str, threading.Thread] = {}
        self.signals = 0

    # -- lifecycle ------------------------------------------------------------------------------

    def run(self) -> int:
        log(
            "info",
            "worker started; SIGTERM or Ctrl-C drains it",
            worker_id=self.cfg.worker_id,
            url=self.cfg.url,
            pool=self.cfg.pool,
            handlers=list(self.handlers),
            concurrency=self.cfg.concurrency,
        )
        for name, target in (("claimer", self.claim_loop), ("heartbeat", self.heartbeat_loop)):
            self.threads[name] = threading.Thread(target=self.guard(target), name=name, daemon=True)
        self.threads["completer"] = threading.Thread(target=self.guard(self.complete_loop), name="completer", daemon=True)
        for i in range(self.cfg.concurrency):
            threading.Thread(target=self.guard(self.execute_loop), name=f"handler-{i}", daemon=True).start()
        for t in self.threads.values():
            t.start()
        while not self.wake.wait(0.5):
            pass
        if self.refused is not None:
            log("error", f"the server refused the key ({self.refused}); stopping", worker_id=self.cfg.worker_id)
            return 2
        self.shutdown()
        return self.exit_code

    def guard(self, target: Callable[[], None]) -> Callable[[], None]:
        """Runs a thread's loop; a refused key (or a bug) stops the whole worker."""

        def run() -> None:
            try:
                target()
            except KeyRefused as err:
                self.refused = str(err)
                self.stopping.set()
                self.wake.set()
            except Exception as err:  # a bug: say so, and stop rather than limp on
                log("error", "worker thread failed; stopping", thread=threading.current_thread().name, error=repr(err))
                traceback.print_exc()
                self.exit_code = 1
                self.stopping.set()
                self.wake.set()

        return run

    def on_signal(self, signum: int, _frame: Any) -> None:
        self.signals += 1
        if self.signals > 1:
            log("warn", "second signal: exiting at once; unreleased runs come back when their leases expire")
            os._exit(1)
        log("info", f"{signal.Signals(signum).name}: draining", grace_s=self.cfg.grace)
        self.stopping.set()
        self.wake.set()

    def shutdown(self) -> None:
        """Stop claiming; give running handlers the grace period; release the rest; flush results;
        leave. Every step is bounded."""
        self.stopping.set()
        claimer = self.threads["claimer"]
        self.api.interrupt(claimer)
        claimer.join(5)
        with self.lock:
            waiting = [h for h in self.held.values() if h.started_at is None and not h.finished]
            for h in waiting:
                h.finished = True
        for _ in range(self.cfg.concurrency):
            self.todo.put(None)
        grace_end = time.monotonic() + self.cfg.grace
        self.release(waiting, grace_end + 5)
        with self.lock:
            while any(h.started_at is not None and not h.finished for h in self.held.values()):
                left = grace_end - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)
            late = [h for h in self.held.values() if not h.finished]
            for h in late:
                h.finished = True
                h.cancelled.set()
        if late:
            log("warn", "grace period over: releasing runs still running", runs=[h.run_id for h in late])
        flush_end = time.monotonic() + max(5.0, self.cfg.grace)
        self.release(late, flush_end)
        with self.lock:
            while (self.results or self.sending) and time.monotonic() < flush_end:
                self.changed.wait(max(0.0, flush_end - time.monotonic()))
            unsent = len(self.results) + self.sending
        if unsent:
            log("warn", "results not delivered before the deadline; their runs will be retried", results=unsent)
        self.closed.set()
        try:
            self.api.call("DELETE", f"/v1/workers/{self.cfg.worker_id}", deadline=time.monotonic() + 5)
        except (Unavailable, KeyRefused) as err:
            log("warn", "could not say goodbye to the server", error=str(err))
        log("info", "worker stopped", worker_id=self.cfg.worker_id)

    def release(self, runs: list[Held], deadline: float) -> None:
        """Gives runs back without spending an attempt. A 409 means the lease was lost already."""
        for h in runs:
            body: dict[str, Any] = {"lease_token": h.token, "reason": "worker shutdown"}
            if h.started_at is not None:
                body["started_at"] = _iso(h.started_at + self.offset_s)
            try:
                a = self.api.call("POST", f"/v1/runs/{h.run_id}/release", body, deadline=deadline)
                if a.status == 200:
                    log("info", "run released", run_id=h.run_id)
                else:
                    log("warn", "run not released", run_id=h.run_id, status=a.status, code=a.code)
            except (Unavailable, KeyRefused) as err:
                log("warn", "run not released; it comes back when its lease expires", run_id=h.run_id, error=str(err))
            with self.lock:
                self.held.pop(h.run_id, None)
                self.changed.notify_all()

    # -- claim ----------------------------------------------------------------------------------

    def claim_loop(self) -> None:
        cfg = self.cfg
        while not self.stopping.is_set():
            with self.lock:
                while len(self.held) >= cfg.concurrency and not self.stopping.is_set():
                    self.changed.wait(1.0)
                room = cfg.concurrency - len(self.held)
            if self.stopping.is_set():
                return
            body = {
                "worker_id": cfg.worker_id,
                "pool": cfg.pool,
                "handlers": list(self.handlers),
                "max": min(room, MAX_CLAIM),
                "wait_ms": cfg.wait_ms,
                # The same id on every retry of this claim: the server answers the runs it already
                # leased to it rather than leasing more (a lost answer strands nothing).
                "claim_id": str(uuid.uuid4()),
            }
            try:
                a = self.api.call("POST", "/v1/leases", body, timeout=cfg.wait_ms / 1000 + 15, give_up=self.stopping)
            except Unavailable:
                return  # stopping
            # A claim answered just as we stopped is held like any other: shutdown releases its runs.
            if a.status != 200:
                log("error", "claim refused", status=a.status, code=a.code, error=a.message)
                if a.status == 400:  # our request is wrong (pool or handler names): retrying will not help
                    self.exit_code = 1
                    self.stopping.set()
                    self.wake.set()
                    return
                self.stopping.wait(BACKOFF_CAP_S)
                continue
            server_now = _instant(a.body["server_time"])
            # server_time is when the answer left (a long-poll may have waited before): good to
            # within the answer's way back, enough for started_at, which the server bounds anyway.
            self.offset_s = server_now - time.time()
            for run in a.body["runs"]:
                h = Held(run, max(1.0, _instant(run["lease_expires_at"]) - server_now))
                with self.lock:
                    self.held[h.run_id] = h
                log("info", "run claimed", run_id=h.run_id, job_id=run["job_id"], handler=run["handler"], attempt=run["attempt"])
                self.todo.put(h)

    # -- execute --------------------------------------------------------------------------------

    def execute_loop(self) -> None:
        while True:
            h = self.todo.get()
            if h is None:
                return
            with self.lock:
                # Not started once stopping: shutdown releases it instead.
                if h.finished or self.stopping.is_set() or self.held.get(h.run_id) is not h:
                    continue
                h.started_at = time.time()
            self.execute(h)

    def execute(self, h: Held) -> None:
        run = h.run
        # A run claimed ahead of its time (`ahead_ms`) starts at its available_at; we claim none ahead.
        result: dict[str, Any] = {"run_id": h.run_id, "lease_token": h.token}
        try:
            value = self.handlers[run["handler"]](Context(run, h.cancelled))
            result["status"] = "succeeded"
            if value is not None:
                text = value if isinstance(value, str) else json.dumps(value)
                result["output"] = text[-MAX_OUTPUT:]
        except Exception as err:  # every failure is reported; PermanentError decides `retryable`
            result["status"] = "failed"
            result["error"] = f"{type(err).__name__}: {err}"[:MAX_ERROR]
            result["error_stack"] = traceback.format_exc()[-MAX_ERROR:]
            if isinstance(err, PermanentError):
                result["retryable"] = False
            elif isinstance(err, RetryableError) and err.retry_after_ms is not None:
                result["retry_after_ms"] = err.retry_after_ms
        self.finish(h, result)

    def finish(self, h: Held, result: dict[str, Any]) -> None:
        """Queues a result for the completer, unless the run was dropped meanwhile."""
        with self.lock:
            if h.finished:
                log("warn", "result dropped: the run is no longer ours", run_id=h.run_id)
                return
            h.finished = True
            if h.started_at is not None:
                result["started_at"] = _iso(h.started_at + self.offset_s)
            self.results.append(result)
            self.changed.notify_all()

    # -- complete -------------------------------------------------------------------------------

    def complete_loop(self) -> None:
        while True:
            with self.lock:
                while not self.results and not self.closed.is_set():
                    self.changed.wait(1.0)
                if not self.results and self.closed.is_set():
                    return
            time.sleep(COMPLETE_LINGER_S)  # let the results of runs ending together share a request
            with self.lock:
                batch = self.results[:MAX_RESULTS]
                del self.results[:MAX_RESULTS]
                self.sending = len(batch)
            try:
                outcomes = self.send(batch)
            except Unavailable as err:
                log("warn", "results not delivered", error=str(err), results=len(batch))
                outcomes = []
            with self.lock:
                for entry in batch:
                    self.held.pop(entry["run_id"], None)
                self.sending = 0
                self.changed.notify_all()
            for entry, outcome in zip(batch, outcomes):
                self.report(entry, outcome)

    def send(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Delivers results; one outcome per entry, in order. Retries only what a retry can fix:
        never an entry the server answered `lost` (the lease is someone else's now)."""
        # Retried until delivered (the heartbeats keep the leases live meanwhile; a lease that
        # lapsed anyway answers `lost`), or until shutdown stops waiting for it (`closed`).
        if self.batch:
            a = self.api.call("POST", "/v1/runs/complete", {"results": batch}, give_up=self.closed)
            if a.status == 200:
                return a.body["results"]
            # The route never answers 404 as a whole (an unknown run is an entry's `not_found`):
            # a 404 means a server from before it.
            if a.status == 404:
                log("warn", "the server has no POST /v1/runs/complete; completing one run per request")
                self.batch = False
            else:
                log("warn", "batch refused; completing one run per request", status=a.status, error=a.message)
        outcomes = []
        for entry in batch:
            body = {k: v for k, v in entry.items() if k != "run_id"}
            a = self.api.call("POST", f"/v1/runs/{entry['run_id']}/complete", body, give_up=self.closed)
            if a.status == 200:
                outcomes.append({"run_id": entry["run_id"], "outcome": "done", "status": 200, **a.body})
            else:
                kind = {409: "lost", 404: "not_found"}.get(a.status, "refused")
                outcomes.append({"run_id": entry["run_id"], "outcome": kind, "status": a.status, "error": {"code": a.code, "message": a.message}})
        return outcomes

    def report(self, entry: dict[str, Any], outcome: dict[str, Any]) -> None:
        run_id = entry["run_id"]
        if outcome.get("outcome") != "done":
            # lost / not_found / conflict: nothing was written. Drop it: retrying the same write
            # cannot succeed, and the run is (or will be) another worker's.
            err = outcome.get("error") or {}
            log("warn", f"result dropped ({outcome.get('outcome')})", run_id=run_id, code=err.get("code"), error=err.get("message"))
            return
        state = outcome.get("state")
        if state == "succeeded":
            log("info", "run succeeded", run_id=run_id)
        elif state == "dead":
            log("warn", "run failed; dead-lettered", run_id=run_id, error=entry.get("error"))
        else:
            log("info", "run failed; will retry", run_id=run_id, attempt=outcome.get("attempt"), available_at=outcome.get("available_at"), error=entry.get("error"))

    # -- heartbeat ------------------------------------------------------------------------------

    def heartbeat_loop(self) -> None:
        while True:
            with self.lock:
                leases = [h for h in self.held.values()]
            interval = min((h.lease_s for h in leases), default=3.0) / LEASE_FRACTION
            if self.closed.wait(interval):
                return
            self.time_out()
            with self.lock:
                leases = [h for h in self.held.values()]
            for i in range(0, len(leases), MAX_HEARTBEAT):
                self.beat(leases[i : i + MAX_HEARTBEAT], interval)

    def beat(self, leases: list[Held], interval: float) -> None:
        body = {"leases": [{"run_id": h.run_id, "lease_token": h.token} for h in leases]}
        try:
            # Retried until the lease that ends first would lapse: a server back by then keeps it.
            a = self.api.call(
                "POST",
                f"/v1/workers/{self.cfg.worker_id}/heartbeat",
                body,
                deadline=time.monotonic() + interval * (LEASE_FRACTION - 1),
                give_up=self.closed,
            )
        except Unavailable as err:
            log("warn", "heartbeat not delivered", error=str(err), runs=len(leases))
            return
        if a.status != 200:
            log("warn", "heartbeat refused", status=a.status, code=a.code, error=a.message)
            return
        for run_id in a.body["lost"]:
            self.drop(run_id, "lease lost")

    def drop(self, run_id: str, why: str) -> None:
        """The lease is gone: stop the handler (cooperatively) and never send its result."""
        with self.lock:
            h = self.held.pop(run_id, None)
            if h is None:
                return
            running = not h.finished
            h.finished = True
            h.cancelled.set()
            self.changed.notify_all()
        if running:
            log("warn", f"run dropped: {why}", run_id=run_id)

    def time_out(self) -> None:
        """A run past its timeout_seconds fails (retryably) now; its handler is told to stop. A
        Python thread cannot be killed: a handler that ignores `cancelled` keeps its thread."""
        now = time.time()
        with self.lock:
            over = [
                h
                for h in self.held.values()
                if not h.finished
                and h.started_at is not None
                and h.run.get("timeout_seconds")
                and now - h.started_at > h.run["timeout_seconds"]
            ]
        for h in over:
            h.cancelled.set()
            self.finish(
                h,
                {
                    "run_id": h.run_id,
                    "lease_token": h.token,
                    "status": "failed",
                    "error": f"TimeoutError: the handler ran past {h.run['timeout_seconds']}s",
                },
            )


# ---------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description="A Tock worker in Python (standard library only).")
    p.add_argument("--url", default=env("TOCK_URL", "http://127.0.0.1:8080"), help="Tock server (env TOCK_URL; default %(default)s)")
    p.add_argument("--key", default=env("TOCK_KEY"), help="API key of role worker (env TOCK_KEY; none for tock dev)")
    p.add_argument("--pool", default=env("TOCK_POOL", "default"), help="pool to claim from (env TOCK_POOL; default %(default)s)")
    p.add_argument(
        "--handlers",
        default=env("TOCK_HANDLERS", ",".join(HANDLERS)),
        help="comma-separated handlers to run (env TOCK_HANDLERS; default all: %(default)s)",
    )
    p.add_argument("--concurrency", type=int, default=int(env("TOCK_CONCURRENCY", "4")), help="runs at once (env TOCK_CONCURRENCY; default %(default)s)")
    p.add_argument("--grace", type=float, default=float(env("TOCK_GRACE", "10")), help="seconds running handlers get to finish on SIGTERM (env TOCK_GRACE; default %(default)s)")
    p.add_argument("--wait-ms", type=int, default=int(env("TOCK_WAIT_MS", "20000")), help="long-poll of a claim, 0-30000 ms (env TOCK_WAIT_MS; default %(default)s)")
    p.add_argument("--worker-id", default=env("TOCK_WORKER_ID"), help="unique per process (env TOCK_WORKER_ID; default py-<host>-<pid>-<random>)")
    p.add_argument("--log-format", default=env("TOCK_LOG_FORMAT", "text"), choices=["text", "pretty", "json"], help="text (stderr) or json (stdout)")
    cfg = p.parse_args(argv)
    cfg.handlers = [h.strip() for h in cfg.handlers.split(",") if h.strip()]
    unknown = [h for h in cfg.handlers if h not in HANDLERS]
    if unknown or not cfg.handlers:
        p.error(f"unknown handlers {unknown}; this file has {list(HANDLERS)}")
    if not 1 <= cfg.concurrency <= MAX_CLAIM:
        p.error(f"--concurrency must be 1-{MAX_CLAIM}")
    if not 0 <= cfg.wait_ms <= 30_000:
        p.error("--wait-ms must be 0-30000")
    cfg.worker_id = cfg.worker_id or f"py-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return cfg


def main(argv: list[str]) -> int:
    global _log_json
    cfg = parse_args(argv)
    _log_json = cfg.log_format == "json"
    worker = Worker(cfg, Api(cfg.url, cfg.key))
    signal.signal(signal.SIGTERM, worker.on_signal)
    signal.signal(signal.SIGINT, worker.on_signal)
    return worker.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
