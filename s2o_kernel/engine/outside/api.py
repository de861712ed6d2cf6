"""``api`` calls (SPEC 7.1): HTTP through an API profile, with httpx.

One pooled ``httpx.AsyncClient`` per profile per gateway, whose base URL, headers and query are the
profile's evaluated fields (:meth:`~.gateway.Gateway.credentials`). A call's fields are
``{"method", "path", "query", "headers", "body", "has_body"}`` (the command's evaluated fields):

* ``path`` is added to the base URL only where the profile's ``allow_path`` is true, ``headers`` only
  where ``allow_headers`` is; otherwise the call is refused (``fragment``; validation refuses it first).
  The profile's own headers and query win over a command's of the same name. A path never leaves the
  profile's base URL (:func:`check_path`; the built URL is checked again): no scheme or host, no ``..``.
* ``body``: a string is sent as text (``text/plain; charset=utf-8``), any other JSON value as JSON.
* The response body is read as it streams, inflated here (``gzip``, ``deflate``; a step at a time) and
  stops at ``max_response_bytes`` (``api-too-large``; a ``Content-Length`` past it is refused before
  reading). Its text is decoded from the charset its ``Content-Type`` declares when SPEC 7.1 lists it,
  else as UTF-8 (:func:`.bounded.decode_text`). ``result`` is the decoded JSON when the response's
  ``Content-Type`` is JSON (``application/json`` or ``…+json``) and it parses as finite JSON, else the
  text. What the text and its JSON take in memory is charged before they are built
  (:class:`.bounded.Budget`: at most twice ``max_response_bytes``; past it ``api-too-large``), and JSON
  deeper than the engine's depth bound is ``too-deep`` (:func:`.bounded.loads`).
* A status outside 200–299 is ``api-status`` with ``details`` ``{"status": INT, "body": RESULT}``
  (``exc.status``, ``exc.body`` in ``onError``); a connection failure ``api-failed``; a timeout
  (``request.timeout``, the smaller of the command's, the profile's and what is left of the run's)
  ``api-timeout``.

:data:`ECHO_URL` names the embedded ``echo`` profile's server: :class:`EchoTransport`, an in-process
httpx transport (no socket) answering every request with its method, path, query and body, which it
decodes within the profile's ``max_response_bytes`` as the handler decodes a response.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import httpx

from ...bounds import DECODING_ROUNDS
from ..errors import S2OError
from .bounded import ACCEPT_ENCODING, Budget, NotJson, decode_text, loads, read_body
from .call import METHODS, OutsideCall, StreamFn

if TYPE_CHECKING:
    from .gateway import Gateway
    from .profiles import ApiProfile

#: The ``url`` of the embedded ``echo`` profile (SPEC 7.1): served in-process by :class:`EchoTransport`.
ECHO_URL = "s2o-echo:"


class EchoTransport(httpx.AsyncBaseTransport):
    """The echo application as an httpx transport: answers ``{"method", "path", "query", "body"}`` (the JSON body
    decoded, else its text, ``None`` when empty), status 200, no socket. The body is decoded within a budget of
    ``limit`` bytes as a response is (:func:`decode_body`); a body past it is answered with status 413 (400 for
    JSON nested too deeply) and ``{"error": MESSAGE}``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Echo ``request``."""
        raw = await request.aread()
        body: Any = None
        if raw:
            budget = Budget(self.limit, "api-too-large", f"max_response_bytes = {self.limit}")
            try:
                body = decode_body(request.headers.get("content-type", ""), raw, budget, "the request body")
            except S2OError as exc:
                return _json_response(400 if exc.code == "too-deep" else 413, [_json({"error": exc.message})])
        query = dict(request.url.params.multi_items())
        head = _json({"method": request.method, "path": request.url.path, "query": query})[:-1] + ',"body":'
        text = _json(body)
        body = None  # its JSON text is the answer's: the body is not held a third time while that is encoded
        return _json_response(200, [head, text, "}"])


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _Parts(httpx.AsyncByteStream):
    """A body sent as the parts it was made in (never joined into one more copy)."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.parts:
            yield self.parts.pop(0)  # read once, and held no more


def _json_response(status: int, texts: list[str]) -> httpx.Response:
    """A response whose body is the JSON ``texts`` make together, streamed as a server's is (not read ahead), each
    text encoded apart and emptied from ``texts`` once it is."""
    parts = []
    for i, text in enumerate(texts):
        parts.append(text.encode("utf-8"))
        texts[i] = ""
        del text
    return httpx.Response(status, headers={"content-type": "application/json",
                                           "content-length": str(sum(len(part) for part in parts))},
                          stream=_Parts(parts))


def make_client(creds: dict[str, Any], profile: ApiProfile) -> tuple[httpx.AsyncClient, Any]:
    """A pooled client for the evaluated ``creds`` (url, headers, query) and its async closer. It asks for the
    content encodings :func:`.bounded.decoded_chunks` inflates, unless the profile's headers name their own."""
    url = creds["url"]
    transport = EchoTransport(profile.max_response_bytes) if url.strip() == ECHO_URL else None
    base = "http://echo.s2o" if transport is not None else url
    headers = creds.get("headers") or {}
    try:
        # the url's own query joins the profile's query as the client's params: httpx would drop it from the
        # base url as soon as a command adds a parameter of its own
        parsed = httpx.URL(base)
        params = httpx.QueryParams(parsed.query).merge(creds.get("query") or {})
        client = httpx.AsyncClient(base_url=parsed.copy_with(query=None), headers=headers, params=params,
                                   timeout=float(profile.timeout), transport=transport, follow_redirects=False)
    except (ValueError, TypeError, httpx.InvalidURL) as exc:
        raise S2OError("api-failed", f"the profile's url cannot be used: {exc}") from None
    if not any(name.lower() == "accept-encoding" for name in headers):
        client.headers["Accept-Encoding"] = ACCEPT_ENCODING
    return client, client.aclose


#: What a command's path may not hold: a backslash (read as ``/`` by many servers), ``#`` and control
#: characters (request splitting, ambiguous parsing).
_PATH_FORBIDDEN = re.compile(r"[\\#\x00-\x1f\x7f]")


#: Headers a command never sets, even where ``allow_headers`` is true: they pick the server behind an
#: address (``Host``) or frame the request (request smuggling, a proxy's credentials).
CONNECTION_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive",
                                "upgrade", "te", "trailer", "proxy-authorization", "proxy-connection"})


def check_path(path: str) -> None:
    """Refuse (``fragment``) a command's ``path`` that could leave its profile's base URL, so the profile's
    credentials never go to another host or above its base path (SPEC 7.1, 12): an absolute URL or any
    scheme (``http:``), a network path (``//host``), a dot segment (``..``, ``%2e%2e``), a backslash, a
    fragment (``#``) or a control character, as written or as a server may read it
    (:func:`_server_readings`). :func:`handle` also checks the URL it builds against the base
    (:func:`_check_origin`): this is the early, readable refusal."""
    if ":" in path.split("/", 1)[0] or path.lstrip("/").startswith("/") or path.startswith("//"):
        raise S2OError("fragment", "a command's path is relative to its profile's url: no scheme, no host")
    if _PATH_FORBIDDEN.search(path) or any(
            _PATH_FORBIDDEN.search(text) or any(_is_dot(s) for s in _SEPARATORS.split(text))
            for text in _server_readings(path)):
        raise S2OError("fragment", "a command's path may not hold '.' or '..' segments, backslashes, '#' "
                       "or control characters, also percent-encoded")


#: What a server may take for a path separator once it decodes a path (``%2f``, ``%5c``).
_SEPARATORS = re.compile(r"[/\\]")


def _server_readings(path: str) -> list[str]:
    """``path`` as servers and proxies may read it: as written, then percent-decoded up to :data:`DECODING_ROUNDS`
    times, each also NFKC-folded (``\uff0e`` is ``.``). Dot segments in any reading climb above the base
    on some server: ``..%2f`` where ``%2f`` is decoded before the path is normalised (nginx), ``..;`` where
    path parameters are dropped (Tomcat), full-width dots where names are folded."""
    readings = [path]
    for _ in range(DECODING_ROUNDS):
        decoded = unquote(readings[-1], errors="replace")
        if decoded == readings[-1]:
            break
        readings.append(decoded)
    return readings + [unicodedata.normalize("NFKC", text) for text in readings if not text.isascii()]


def _is_dot(segment: str) -> bool:
    """A segment a server may read as ``.`` or ``..``: ignoring its ``;`` parameters and surrounding spaces."""
    return segment.split(";", 1)[0].strip() in (".", "..")


def _check_origin(base: httpx.URL, url: httpx.URL) -> None:
    """Refuse (``fragment``) a built request URL whose scheme, host or port differs from the profile's base
    URL, or whose path is not under the base's path."""
    base_path = base.raw_path.split(b"?", 1)[0].rstrip(b"/")
    path = url.raw_path.split(b"?", 1)[0]
    if (url.scheme, url.host, url.port) != (base.scheme, base.host, base.port) or \
            not (path == base_path or path.startswith(base_path + b"/")):
        raise S2OError("fragment", "a command's path may not leave its profile's url")


def _check_fields(profile: ApiProfile, fields: dict[str, Any], at: str) -> None:
    """Refuse (``fragment``, at ``<at>.<field>``) a call's fields of the wrong type, or that the profile
    forbids; ``at`` is the command's JSON path."""
    method, path, query, headers = (fields.get(k) for k in ("method", "path", "query", "headers"))
    if method is not None and (type(method) is not str or method.upper() not in METHODS):
        raise S2OError("fragment", f"method is one of {', '.join(METHODS)}", path=f"{at}.method")
    if path is not None and type(path) is not str:
        raise S2OError("fragment", f"path is expected to be str, got {type(path).__name__}", path=f"{at}.path")
    for name, value in (("query", query), ("headers", headers)):
        if value is not None and type(value) is not dict:
            raise S2OError("fragment", f"{name} is expected to be dict, got {type(value).__name__}",
                           path=f"{at}.{name}")
    if path not in (None, "") and not profile.allow_path:
        raise S2OError("fragment", "this api profile does not allow a path (allow_path = false)", path=f"{at}.path")
    if path:
        try:
            check_path(path)
        except S2OError as exc:
            raise exc.with_context(path=f"{at}.path") from None
    if headers and not profile.allow_headers:
        raise S2OError("fragment", "this api profile does not allow a command's headers (allow_headers = false)",
                       path=f"{at}.headers")
    for name in headers or {}:
        if type(name) is not str or name.strip().lower() in CONNECTION_HEADERS:
            raise S2OError("fragment", f"a command may not set the header {str(name)[:80]!r}: it decides where and "
                           "how the request goes, which the profile's url decides", path=f"{at}.headers")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _request_args(profile: ApiProfile, fields: dict[str, Any], at: str) -> dict[str, Any]:
    """httpx ``request`` arguments from a call's fields (checked by :func:`_check_fields`; ``at`` is the
    command's JSON path)."""
    _check_fields(profile, fields, at)
    args: dict[str, Any] = {"method": (fields.get("method") or "GET").upper(), "url": fields.get("path") or ""}
    if fields.get("query"):
        args["params"] = {k: _text(v) for k, v in fields["query"].items()}
    if fields.get("headers"):
        args["headers"] = {k: _text(v) for k, v in fields["headers"].items()}
    if fields.get("has_body"):
        body = fields.get("body")
        if isinstance(body, str):
            args["content"] = body.encode("utf-8")
            args.setdefault("headers", {})["content-type"] = "text/plain; charset=utf-8"
        else:
            args["json"] = body
    return args


def _merge_profile_wins(client: httpx.AsyncClient, args: dict[str, Any]) -> None:
    """Drop the command's headers and query parameters that the profile sets itself (the profile wins)."""
    if "headers" in args:
        args["headers"] = {k: v for k, v in args["headers"].items()
                           if k.lower() == "content-type" or k not in client.headers}
    if "params" in args:
        args["params"] = {k: v for k, v in args["params"].items() if k not in client.params}


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` says JSON: ``application/json`` or ``…+json``."""
    kind = content_type.split(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


def decode_body(content_type: str, raw: bytes | bytearray, budget: Budget, what: str) -> Any:
    """The body ``raw`` decoded (see the module doc): finite JSON when ``content_type`` says JSON, else the text.
    A ``bytearray`` is emptied once its text is decoded, so its bytes and the JSON are never held together.
    Raises ``budget``'s code, or ``too-deep``, as :mod:`.bounded` does."""
    text = decode_text(raw, content_type, budget, what)
    if isinstance(raw, bytearray):
        raw.clear()
    if is_json(content_type):
        try:
            return loads(text, budget, what)
        except NotJson:
            return text
    return text


async def _exchange(client: httpx.AsyncClient, args: dict[str, Any], timeout: float, limit: int, at: str
                    ) -> tuple[int, str, str, bytearray]:
    """Send the request of ``args`` and read its response's body (at most ``limit`` bytes): ``(status, reason,
    content type, body)``. ``args`` is emptied once the request is built, and the request and the response are
    dropped on return, with the bytes they hold (the request's body, the echo application's answer), before
    the body is decoded."""
    req = client.build_request(**args, timeout=timeout)
    args.clear()
    try:
        _check_origin(client.base_url, req.url)
    except S2OError as exc:
        raise exc.with_context(path=f"{at}.path") from None
    response = await client.send(req, stream=True)
    try:
        body = await read_body(response, limit, "api")
    finally:
        await response.aclose()
        # httpx's stream refers back to its response: a cycle only the garbage collector would free, holding
        # the request and its body until then
        response.stream = httpx.ByteStream(b"")
    return response.status_code, response.reason_phrase, response.headers.get("content-type", ""), body


async def handle(gw: Gateway, profile: ApiProfile, request: OutsideCall, on_stream: StreamFn | None) -> Any:
    """Make one ``api`` call (see the module doc); the decoded body."""
    name = request.profile or ""
    creds = gw.credentials("api", name, profile)
    client: httpx.AsyncClient = await gw.pooled(("api", name), lambda: make_client(creds, profile))
    args = _request_args(profile, request.fields, request.path)
    _merge_profile_wins(client, args)
    if not args["url"]:  # the base URL as written (httpx would add a slash)
        args["url"] = str(client.base_url).rstrip("/") if creds["url"].strip() == ECHO_URL else creds["url"]
    shown = f"{args['method']} {request.fields.get('path') or '/'}"
    limit = profile.max_response_bytes
    try:
        status, reason, content_type, raw = await _exchange(client, args, request.timeout, limit, request.path)
    except httpx.TimeoutException:
        raise S2OError("api-timeout", f"{shown} took longer than {request.timeout:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
        raise S2OError("api-failed", f"{shown} failed: {type(exc).__name__}: {exc}") from None
    body = decode_body(content_type, raw, Budget(limit, "api-too-large", f"max_response_bytes = {limit}"),
                       "the response")
    if not 200 <= status <= 299:
        raise S2OError("api-status", f"{shown} answered {status} {reason}".rstrip(),
                       details={"status": status, "body": body})
    return body
