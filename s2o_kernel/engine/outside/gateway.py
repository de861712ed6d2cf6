"""The gateway: serves outside calls in the process that holds the settings and secrets (SPEC 7.1, 12).

:class:`Gateway` implements :class:`~.call.Outside`. It owns an event loop in a thread of its own, where
its pooled clients live (one httpx client per api profile, one SQLAlchemy engine per db profile), so it
serves both an in-process :class:`~..session.Session` (``await gateway.call(request)``, from the
session's loop) and the kernel process, which serves calls a containment worker forwards
(``gateway.call_sync(request)``, blocking).

For each call it

1. finds the profile (``unknown-profile`` when the settings do not define it);
2. evaluates the profile's credential fields (url, headers, query, key; SPEC 1) once, with an engine whose
   ``sys.secret`` holds the secrets (:meth:`Gateway.credentials`), and masks from then on what is secret in
   each as evaluated (:func:`.secrets.field_secrets`: a header or query value and a key whole, a URL's
   password and query values; and the whole of a field that read a secret), whether it read a secret or
   was written literally (SPEC 7.1);
3. checks the call's fields before anything copies them (:func:`.bounded.check_value`): nested no deeper
   than the engine's depth bound (``too-deep``), and of no more items than the profile's
   ``max_response_bytes`` lets a call hold decoded (:data:`TOO_LARGE_CODES`); the worker that sent them is
   not trusted (SPEC 7.1, 12);
4. puts secrets back where the worker's fields hold their placeholders (:func:`.secrets.unplace`), in
   the fields of the kinds that may carry them (:data:`.call.SECRET_KINDS`) only;
5. runs the handler of the call's kind from :data:`HANDLERS`, the one table of kinds (one module per
   kind: :mod:`.api`, :mod:`.db`, imported at the kind's first call), under ``request.timeout``
   (``api-timeout`` for ``api``, ``timedOut`` otherwise);
6. masks every secret value and credential as ``***`` in the result (a result that holds none is handed on
   as it is, not copied), and in the message and details of any error, whose ``path`` becomes the command's
   (``request.path``). The masker starts with every text the settings know to be secret
   (:meth:`~..settings.Settings.sensitive_texts`: the secrets, and the credentials every profile writes
   literally), so a credential is masked even in a call through another profile.

A thread that waits for a call (:meth:`Gateway.call_sync`, :meth:`Gateway.call`) waits at most the call's
timeout plus :data:`~s2o_kernel.bounds.CALL_GRACE` seconds, then cancels it and waits that long again: a
step that holds the gateway's loop (which no timeout on that loop can reach) keeps no caller past the run's
time limit plus SPEC 12's 2 s. A call that has not ended by then has its loop thread given up
(:meth:`Gateway._give_up`): the next call starts a new one, and the old one closes its pools and ends once
the step is over.

An exception a handler does not turn into a coded error becomes ``<kind>-failed`` (``unexpected`` for a
kind without such a code), with its type and masked text. :meth:`Gateway.close` disposes every pool and
ends the loop thread (``%reset``, shutdown, settings changes); the next call opens them anew. A gateway
that is garbage-collected unclosed (its session dropped) does the same without waiting (:func:`_release`):
no loop thread, driver thread or connection outlives the session that made it.
``answer`` (an :data:`~.call.AnswerFn`) is what ``ask`` uses to ask a person; the kernel sets it per cell.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import importlib
import itertools
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from ...bounds import CALL_GRACE, CALL_UNWIND, CLOSE_GRACE, DEFAULT_MAX_RESPONSE, MAX_RESULT_BYTES
from ..errors import S2OError
from ..language.dynamic import expression_of
from ..run.engine import Engine
from ..run.loop import LoopThread, Submitted
from ..run.scopes import placeholder, reveal
from ..run.state import SessionState
from ..settings import Settings
from . import ask
from .bounded import Budget, check_value
from .call import SECRET_KINDS, AnswerFn, OutsideCall, StreamFn, note_replayed
from .cassette import Cassette, Take, canonical, check_replayed, effective_mode
from .secrets import CREDENTIAL_FIELDS, Masker, field_secrets, inert, placeholders_in, secret_reads, unplace

#: ``async handler(gateway, profile, request, on_stream)`` → the call's JSON result.
Handler = Callable[["Gateway", Any, OutsideCall, "StreamFn | None"], Awaitable[Any]]

#: The kinds of outside call and what serves each: the one place a kind is registered. A name is the module
#: of this package whose ``handle`` serves the kind, imported by :func:`handler_of` at the kind's first call,
#: before its timeout starts: a kernel imports no HTTP client until a cell calls an ``api`` (httpx's import at
#: the first cell wrote ~6 MiB of pages the kernel shared with its worker; docs/performance.md, "Kernel").
#: A handler itself may stand in for a module (tests).
HANDLERS: dict[str, str | Handler] = {
    "api": "api",
    "db": "db",
    "llm": "llm",
    "ask": "ask",
}


def handler_of(kind: str) -> Handler | None:
    """The handler of outside calls of ``kind`` (:data:`HANDLERS`; its module imported on first use), ``None``
    for a kind no entry serves. Raises what the module's import raises."""
    found = HANDLERS.get(kind)
    if isinstance(found, str):
        handler: Handler = importlib.import_module(f"{__package__}.{found}").handle
        return handler
    return found

#: The code of a call that passes its timeout, per kind (else ``timedOut``: the run's time ran out).
TIMEOUT_CODES = {"api": "api-timeout"}
#: The code of a call that failed in a way its handler did not code, per kind.
FAILED_CODES = {"api": "api-failed", "db": "db-failed", "llm": "llm-failed"}
#: The code of a call whose fields hold more than it may, per kind (:func:`request_budget`).
TOO_LARGE_CODES = {"api": "api-too-large", "db": "db-too-large", "llm": "llm-too-large"}


def request_budget(kind: str, profile: Any) -> Budget | None:
    """What a call of ``kind`` through ``profile`` may hold decoded of its own fields: as much as of a response
    (its ``max_response_bytes``; a ``db`` call as much as of a result), or ``None`` for a kind with no such
    bound (``ask``: a person's questions), whose fields are checked for depth only."""
    code = TOO_LARGE_CODES.get(kind)
    if code is None:
        return None
    limit = getattr(profile, "max_response_bytes", MAX_RESULT_BYTES if kind == "db" else DEFAULT_MAX_RESPONSE)
    return Budget(limit, code, f"max_response_bytes = {limit}" if kind != "db" else f"the result cap of {limit}")


def check_fields(request: OutsideCall, profile: Any) -> None:
    """Refuse ``request``'s fields before anything copies them (see the module doc): ``too-deep`` at the JSON
    path of a container nested past the engine's depth bound, the kind's code (:data:`TOO_LARGE_CODES`) past
    the items :func:`request_budget` allows."""
    check_value(request.fields, request_budget(request.kind, profile), f"the {request.kind} call's fields",
                request.path)

Closer = Callable[[], Awaitable[None]]


def _wait_uninterrupted(ended: threading.Event, seconds: float) -> None:
    """Wait up to ``seconds`` for ``ended``; a further ``KeyboardInterrupt`` meanwhile (a second SIGINT)
    does not cut the wait short."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if ended.wait(max(deadline - time.monotonic(), 0.0)) or time.monotonic() >= deadline:
                return
        except KeyboardInterrupt:
            pass


def _holds_masked(masker: Masker, value: Any) -> bool:
    """Whether a text of ``value`` (a JSON value, keys included) holds something ``masker`` masks; walked with a
    stack of iterators, without copying it (masking copies the whole value)."""
    if not masker.texts:
        return False
    if isinstance(value, str):
        return masker.text(value) is not value
    stack: list[Any] = [iter((value,))]
    while stack:
        item = next(stack[-1], _DONE)
        if item is _DONE:
            stack.pop()
        elif isinstance(item, str):
            if masker.text(item) is not item:
                return True
        elif isinstance(item, list):
            stack.append(iter(item))
        elif isinstance(item, dict):
            stack.append(itertools.chain(item.keys(), item.values()))
    return False


_DONE = object()


def _release(loop: LoopThread, pools: dict[tuple[str, str], tuple[Any, Closer]]) -> None:
    """Close ``pools`` on ``loop`` and then stop it, without waiting: a collected gateway's finalizer,
    which may run in any thread, the loop's own included. Each pool gets :data:`CLOSE_GRACE` seconds."""

    async def close_then_stop() -> None:
        try:
            for _, closer in list(pools.values()):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closer(), CLOSE_GRACE)
        finally:
            loop.stop()

    with contextlib.suppress(RuntimeError):  # the loop is closed already
        loop.loop.call_soon_threadsafe(lambda: loop.loop.create_task(close_then_stop()))


class Gateway:
    """Serves outside calls with the profiles and secrets of ``settings`` (see the module doc).

    ``Gateway(settings)`` starts nothing: its loop thread and pools start with the first call.

    Attributes:
        settings: the settings whose profiles and secrets it uses.
        answer: asks a person for ``ask`` (``None``: nobody can answer).
        masker: the texts it masks (secret values, credentials as written and as evaluated).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.answer: AnswerFn | None = None
        self.masker = Masker(settings.sensitive_texts())
        self._loop: LoopThread | None = None
        self._lock = threading.Lock()
        self._pools: dict[tuple[str, str], tuple[Any, Closer]] = {}
        self._credentials: dict[tuple[str, str], dict[str, Any]] = {}
        self._evaluator: SessionState | None = None
        self._answered: dict[str, str] = {}
        self._cassette: Cassette | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # -- the profile and its evaluated fields ----------------------------------------------------
    def profile(self, kind: str, name: str | None, path: str) -> Any:
        """The model of ``profiles.<kind>.<name>``; ``unknown-profile`` (at ``path``) when there is none."""
        named = getattr(self.settings.profiles, kind, None)
        if not isinstance(named, dict) or name is None or name not in named:
            known = ", ".join(sorted(named or {})) or "none"
            raise S2OError("unknown-profile", f"there is no {kind} profile named {name!r} (profiles.{kind}: {known})",
                           path=path)
        return named[name]

    def evaluate(self, text: str, where: str) -> str:
        """The text of a dynamic profile field (SPEC 1) at ``where`` (``profiles.api.crm.url``): plain text
        as is; an expression run with the secrets in ``sys.secret`` and its secret text revealed. When it
        reads a secret its value is masked from then on. Raises ``S2OError`` (``missing-secret``, …) whose
        message names ``where``; ``settings`` when the value is not text."""
        if expression_of(text) is None:
            return text
        if self._evaluator is None:
            self._evaluator = SessionState(Engine(Settings(secrets=dict(self.settings.secrets))))
        try:
            value = reveal(self._evaluator.evaluate_dynamic(text))
        except S2OError as exc:
            raise S2OError(exc.code, f"{where}: {exc.message}", stage="run") from None
        if not isinstance(value, str):
            raise S2OError("settings", f"{where} is expected to be str, got {type(value).__name__}", stage="run")
        if secret_reads(text):
            self.masker.add([value])
        return value

    def credentials(self, kind: str, name: str, profile: Any) -> dict[str, Any]:
        """The profile's credential fields (:data:`~.secrets.CREDENTIAL_FIELDS`), evaluated once per
        gateway: field → text, or → {key: text} for maps (``headers``, ``query``). What is secret in each
        text (:func:`~.secrets.field_secrets`) is masked from then on, whether the field read a secret or
        was written literally (SPEC 7.1)."""
        key = (kind, name)
        if key not in self._credentials:
            out: dict[str, Any] = {}
            for field in CREDENTIAL_FIELDS.get(kind, ()):
                value = getattr(profile, field, None)
                where = f"profiles.{kind}.{name}.{field}"
                if isinstance(value, str):
                    out[field] = self.evaluate(value, where)
                    self.masker.add(field_secrets(field, out[field]))
                elif isinstance(value, dict):
                    out[field] = {k: self.evaluate(v, f"{where}.{k}") for k, v in value.items()}
                    self.masker.add(t for v in out[field].values() for t in field_secrets(field, v))
                else:
                    out[field] = value
                missing = placeholders_in(out[field])
                if missing:  # a replay's stand-in (SPEC 13): this profile's calls cannot go out here
                    raise S2OError("missing-secret", f"{where} reads the secret {missing[0]!r}, which has no value "
                                   "here (replayed runs have stand-ins only)", stage="run")
            self._credentials[key] = out
        return self._credentials[key]

    def _secret_values(self) -> dict[str, str]:
        """Name → value of every secret a call's placeholders may name: the settings' (but a replay's
        stand-ins, which stand for themselves) and the password answers held (:meth:`hold_answer`)."""
        return {k: v for k, v in {**self.settings.secrets, **self._answered}.items() if v != placeholder(k)}

    def hold_answer(self, name: str, text: str) -> str:
        """Keep ``text``, a person's answer to the ``password`` input ``name`` (SPEC 7.1, ``ask``), and give
        the run its placeholder (:func:`~.secrets.placeholder`) instead: the answer never enters the run's
        state, in-process or in the worker. The gateway puts it back where an ``api`` call's fields hold the
        placeholder, and masks it as ``***`` in every result and error from then on. Each answer gets a
        placeholder of its own (``ask.N.NAME``), so a later answer to the same input never changes what an
        earlier one stands for; the answers are kept for the gateway's lifetime (a session's)."""
        key = f"ask.{len(self._answered)}.{name}"
        self._answered[key] = text
        self.masker.add([text])
        return placeholder(key)

    async def pooled(self, key: tuple[str, str], make: Callable[[], tuple[Any, Closer]]) -> Any:
        """The pooled client of ``key`` (``("api", name)``), made with ``make()`` → ``(client, async close)``
        on first use; runs on the gateway's loop."""
        if key not in self._pools:
            self._pools[key] = make()
        return self._pools[key][0]

    # -- calls ----------------------------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.loop.is_closed():
                self._loop = LoopThread()
                if self._finalizer is not None:
                    self._finalizer.detach()
                self._finalizer = weakref.finalize(self, _release, self._loop, self._pools)
            return self._loop.loop

    # -- record and replay (SPEC 13) ---------------------------------------------------------------
    def cassette(self) -> Cassette | None:
        """The cassette this gateway's calls are recorded to and replayed from, opened on first use from the
        settings' ``replay`` (:func:`~.cassette.effective_mode`: ``S2O_REPLAY`` first); ``None`` in mode ``off``.
        Raises ``replay-mode`` or ``cassette`` (no file named, or one that is not a cassette)."""
        replay = self.settings.replay
        mode = effective_mode(replay.mode)
        if mode == "off":
            return None
        if self._cassette is None or self._cassette.mode != mode:
            if not replay.cassette:
                raise S2OError("cassette", f"replay mode {mode} needs a cassette file: %replay {mode} FILE, or "
                               "replay.cassette in the settings")
            self._cassette = Cassette(replay.cassette, mode)
        return self._cassette

    def _take(self, request: OutsideCall) -> Take | None:
        """The call's visit to the cassette, or ``None`` with none; raises ``replay-miss`` and friends, masked,
        at the call's path."""
        try:
            cassette = self.cassette()
            if cassette is None:
                return None
            model = None
            if request.kind == "llm":
                model = getattr(self.profile("llm", request.profile, request.path), "model", None)
            return Take(cassette, request.kind, request.profile, canonical(request.kind, request.fields, model))
        except S2OError as exc:
            exc.stage = "run"
            raise self.masker.error(exc.with_context(path=request.path)) from None

    def _replayed(self, take: Take, request: OutsideCall, on_stream: StreamFn | None) -> Any:
        """``take``'s recorded outcome, as a live one is handed on: inert (:func:`~.secrets.inert`), bounded as
        the kind's response is (:func:`request_budget`), of the shape a live call gives (:func:`check_replayed`:
        a recorded price is a finite, non-negative number) and masked; a ``password`` answer to an ``ask`` is
        held again (its text is in no cassette: the run gets a placeholder of ``***``, :meth:`hold_answer`)."""
        try:
            result = inert(take.replay(on_stream, request.path))
            profile = self.profile(request.kind, request.profile, request.path) if request.kind != "ask" else None
            check_value(result, request_budget(request.kind, profile), f"the recorded {request.kind} outcome",
                        request.path)  # bounded as a live response is
            check_replayed(request.kind, result)
        except S2OError as exc:
            exc.stage = "run"
            raise self.masker.error(exc.with_context(path=request.path)) from None
        if request.kind == "ask" and type(result) is dict:
            for question in request.fields.get("inputs") or ():
                if type(question) is dict and question.get("type") == "password" and question.get("name") in result:
                    result[question["name"]] = self.hold_answer(question["name"], "***")
        return self.masker.value(result)

    def _keep(self, take: Take, *, result: Any = None, error: S2OError | None = None) -> None:
        """Record the call's outcome; ``cassette-secret`` at the call's path when the file would hold a secret
        the gateway knows (its masker's texts: the secrets, credentials and password answers)."""
        try:
            take.keep(self.masker.texts, result=result, error=error)
        except S2OError as exc:
            exc.stage = "run"
            raise exc.with_context(path=error.path if error is not None else None) from None

    async def call(self, request: OutsideCall, on_stream: StreamFn | None = None) -> Any:
        """Serve ``request`` from another event loop (an in-process session's), from the cassette when one
        answers it (SPEC 13; recorded otherwise, as the mode says); see the module doc."""
        take = self._take(request)
        if take is None:
            return await self._call(request, on_stream)
        if take.entry is not None:
            note_replayed(take.entry.get("duration"))
            return self._replayed(take, request, on_stream)
        try:
            result = await self._call(request, take.sink(on_stream))
        except S2OError as exc:
            self._keep(take, error=exc)
            raise
        self._keep(take, result=result)
        return result

    def call_sync(self, request: OutsideCall, on_stream: StreamFn | None = None) -> Any:
        """Serve ``request`` and wait for it here (the kernel process, for a worker's call), from the cassette
        when one answers it (SPEC 13; recorded otherwise, as the mode says); see :meth:`_call_sync`."""
        take = self._take(request)
        if take is None:
            return self._call_sync(request, on_stream)
        if take.entry is not None:
            note_replayed(take.entry.get("duration"))
            return self._replayed(take, request, on_stream)
        try:
            result = self._call_sync(request, take.sink(on_stream))
        except S2OError as exc:
            self._keep(take, error=exc)
            raise
        self._keep(take, result=result)
        return result

    async def _call(self, request: OutsideCall, on_stream: StreamFn | None = None) -> Any:
        """Serve ``request`` from another event loop (an in-process session's); see the module doc.

        When the caller is cancelled (its run stopped or timed out), so is the call, and the caller's
        ``CancelledError`` comes once the call has ended (at most :data:`CALL_UNWIND` seconds): a query,
        a prompt or a request never outlives the run that made it (SPEC 12). A call still running
        :data:`CALL_GRACE` seconds past its timeout is cancelled the same way and ends with its kind's timeout
        code (:meth:`_timed_out`).
        """
        call = Submitted(self._ensure_loop()).start(self._serve(request, on_stream))
        done = asyncio.wrap_future(call.future)
        try:
            return await asyncio.wait_for(asyncio.shield(done), request.timeout + CALL_GRACE)
        except TimeoutError:
            if done.done():  # the call's own outcome, not the wait's
                raise
            call.cancel()
            await asyncio.wait({done}, timeout=CALL_GRACE)
            raise self._timed_out(request, call) from None
        except asyncio.CancelledError:
            if done.cancelled():  # the gateway's loop ended the call itself (close)
                raise
            call.cancel()
            await asyncio.wait({done}, timeout=CALL_UNWIND)
            raise

    def _call_sync(self, request: OutsideCall, on_stream: StreamFn | None = None) -> Any:
        """Serve ``request`` and wait for it here (the kernel process, for a worker's call), at most its timeout
        plus :data:`CALL_GRACE` seconds; then it is cancelled and, once it has ended or :data:`CALL_GRACE` more
        seconds have passed, ends with its kind's timeout code (:meth:`_timed_out`).

        An interrupt (``KeyboardInterrupt``) cancels the call and is raised again. An ``ask`` is answered in
        this thread (:func:`.ask.answer_here`), so an interrupt reaches the person's prompt itself and no
        prompt outlives the call.
        """
        if request.kind == "ask":
            try:
                check_fields(request, None)
                return self.masker.value(ask.answer_here(self, dataclasses.replace(
                    request, fields=unplace(request.fields, self._secret_values()))))
            except S2OError as exc:
                exc.stage = "run"
                raise self.masker.error(exc.with_context(path=request.path)) from None
        call = Submitted(self._ensure_loop()).start(self._serve(request, on_stream))
        try:
            return call.future.result(request.timeout + CALL_GRACE)
        except concurrent.futures.TimeoutError:
            if call.future.done():  # the call's own outcome, not the wait's
                raise
            call.cancel()
            call.ended.wait(CALL_GRACE)
            raise self._timed_out(request, call) from None
        except BaseException:
            call.cancel()
            _wait_uninterrupted(call.ended, CALL_UNWIND)  # the call ends before the interrupt goes on
            raise

    def _timed_out(self, request: OutsideCall, call: Submitted) -> S2OError:
        """The error of a call its caller stopped waiting for (see :meth:`call_sync`); a call that has not ended
        even so holds the loop thread, which is given up (:meth:`_give_up`)."""
        if not call.ended.is_set():
            self._give_up(call.loop)
        code = TIMEOUT_CODES.get(request.kind, "timedOut")
        return self.masker.error(S2OError(code, f"the {request.kind} call took longer than {request.timeout:g} s",
                                          path=request.path))

    def _give_up(self, loop: asyncio.AbstractEventLoop) -> None:
        """Stop using the loop thread of ``loop``, which a step of a call holds: the next call starts a new one
        with new pools, and this one closes its pools and ends once the step is over (:func:`_release`)."""
        with self._lock:
            held = self._loop
            if held is None or held.loop is not loop:
                return
            self._loop = None
            if self._finalizer is not None:
                self._finalizer.detach()
                self._finalizer = None
            pools, self._pools = self._pools, {}
        _release(held, pools)

    async def _serve(self, request: OutsideCall, on_stream: StreamFn | None) -> Any:
        try:
            handler = handler_of(request.kind)
            if handler is None:
                raise S2OError("unexpected", f"no handler serves {request.kind} calls")
            profile = self.profile(request.kind, request.profile, request.path) if request.kind != "ask" else None
            check_fields(request, profile)
            fields = request.fields  # a placeholder a worker forged elsewhere stays text (call.SECRET_KINDS)
            if request.kind in SECRET_KINDS:
                fields = unplace(request.fields, self._secret_values())
                missing = placeholders_in(fields)
                if missing:  # a replay's stand-in (SPEC 13), or a name no secret has: never sent as text
                    raise S2OError("missing-secret", f"the call needs the secret {missing[0]!r}, which has no value "
                                   "here (replayed runs have stand-ins only; this call is not in the cassette)")
            call = OutsideCall(request.kind, request.profile, fields, request.path, request.timeout,
                               request.secrets_used)
            try:
                result = await asyncio.wait_for(handler(self, profile, call, on_stream), request.timeout)
            except TimeoutError:
                code = TIMEOUT_CODES.get(request.kind, "timedOut")
                raise S2OError(code, f"the {request.kind} call took longer than {request.timeout:g} s") from None
        except S2OError as exc:
            exc.stage = "run"
            raise self.masker.error(exc.with_context(path=request.path)) from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a driver's own exception type: coded, masked, never raw
            code = FAILED_CODES.get(request.kind, "unexpected")
            raise self.masker.error(S2OError(code, f"{type(exc).__name__}: {exc}", path=request.path)) from None
        if request.kind != "ask":  # an ask's answers were made inert before the gateway held a password's
            result = inert(result)  # a server's text never holds a placeholder the gateway would resolve
        return self.masker.value(result) if _holds_masked(self.masker, result) else result

    def close(self) -> None:
        """Dispose every pooled client and engine and end the loop thread; the next call starts anew."""
        with self._lock:
            loop, self._loop = self._loop, None
            if self._finalizer is not None:
                self._finalizer.detach()
                self._finalizer = None
        pools, self._pools = self._pools, {}
        self._credentials, self._evaluator = {}, None
        if loop is None:
            return
        if pools and not loop.loop.is_closed():
            async def dispose() -> None:
                for _, closer in pools.values():
                    with contextlib.suppress(Exception):
                        await closer()

            future = asyncio.run_coroutine_threadsafe(dispose(), loop.loop)
            with contextlib.suppress(concurrent.futures.TimeoutError, Exception):
                future.result(CLOSE_GRACE)
        loop.stop()
        loop.thread.join(CLOSE_GRACE)
