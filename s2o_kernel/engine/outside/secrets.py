"""Secrets at the outside door (SPEC 7.1, 12): which secrets a profile reads, the worker's copy of the
settings, and masking.

Every credential field of a profile is a secret, whether it reads ``sys.secret`` or is written literally
(SPEC 7.1). :data:`CREDENTIAL_FIELDS` is the one list of those fields, and :func:`field_secrets` the one
rule of what in a field's text is secret: the whole text of a ``headers`` or ``query`` value and of an
llm ``key``; the password and every query value of a URL (:data:`URL_FIELDS`; its scheme, host and path
are not). Everything that masks takes its texts from these two:

* :func:`literal_credentials`: the secret texts of every credential field written literally, read from the
  settings without running anything (:meth:`~..settings.Settings.sensitive_texts` adds the secrets' values;
  :meth:`~..settings.Settings.redact` masks them in every output, log line, error and display of the
  kernel and the engine);
* the gateway (:meth:`~.gateway.Gateway.credentials`) adds the texts of each field as evaluated, so a field
  that is an expression is masked by what it gave;
* :func:`shown_profiles` shows each field for ``%profiles`` and ``%config`` by the same rule.

The rest of the module:

* :func:`secret_reads`: the names a dynamic string reads as ``sys.secret['NAME']`` (from its syntax
  tree, without running it).
* :func:`worker_settings`: the settings as the containment worker gets them. The worker never holds a
  credential: every secret value becomes a placeholder (:func:`placeholder`, which names the secret and
  shows nothing of it), and every credential field of a profile (:data:`CREDENTIAL_FIELDS`) becomes
  ``***`` when it reads no secret, or ``{ f'***{sys.secret["A"]}…' }`` when it reads some, so the
  worker still knows every profile's name, kind and which secrets it needs (for ``missing-secret`` at
  validation), and nothing else of its credentials.
* :func:`unplace`: the parent's side of placeholders. Text a run in the worker built from a secret (an
  ``api`` command's header ``f'Bearer {sys.secret["K"]}'``) reaches the parent holding the secret's
  placeholder; the gateway puts the value back in just before the call. This gives a run nothing it
  could not have had already: any expression may format ``sys.secret['K']`` into a field (whole: a
  format specification on a secret is refused, :func:`~..policy.guards.format_string`). A password
  answer to ``ask`` is held the same way, in every run: the gateway keeps its text and the run gets a
  placeholder (:meth:`~.gateway.Gateway.hold_answer`).
* :class:`Masker`: replaces every sensitive text (secret values, credentials) with ``***`` in text,
  JSON values and errors, longest first (so a secret that contains another is masked whole), in the
  encoded forms a server may send it back in too (:func:`encoded_forms`).
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import re
import weakref
from collections.abc import Iterable
from typing import Any

from ..errors import ErrorGroup, S2OError
from ..language.dynamic import expression_of
from ..run.scopes import placeholder

#: Profile fields that hold a credential, per kind (``headers`` and ``query``: each value), whether they read
#: a secret or are written literally (SPEC 7.1): the one list every masking and the worker's copy use.
CREDENTIAL_FIELDS: dict[str, tuple[str, ...]] = {
    "api": ("url", "headers", "query"),
    "db": ("url",),
    "llm": ("url", "key"),
    "prompt": (),
}

#: Credential fields that are URLs: their password and every query value are secret, the rest shows
#: (:func:`url_secret_spans`). Every other credential field is secret whole.
URL_FIELDS = frozenset({"url"})

#: What a credential or a secret value shows as.
MASK = "***"

#: A placeholder's name: a secret of the settings (an identifier) or a password answer the gateway holds
#: (``ask.N.NAME``, :meth:`~.gateway.Gateway.hold_answer`); the two never share a name.
_PLACEHOLDER = re.compile(r"\u2063s2o-secret:([A-Za-z_][A-Za-z0-9_.]*)\u2063")




def unplace(value: Any, secrets: dict[str, str]) -> Any:
    """``value`` (JSON) with each placeholder of a known secret replaced by its value, at any depth
    (keys included); unknown names stay as they are."""
    if isinstance(value, str):
        if "\u2063" not in value:
            return value
        return _PLACEHOLDER.sub(lambda m: secrets.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [unplace(v, secrets) for v in value]
    if isinstance(value, dict):
        return {unplace(k, secrets): unplace(v, secrets) for k, v in value.items()}
    return value


def inert(value: Any) -> Any:
    """``value`` (JSON from outside: a server's response, a recorded outcome, a person's answer) with every
    INVISIBLE SEPARATOR (U+2063) removed, at any depth (keys included): text that came in can never hold a
    secret's placeholder, so a run that passes it on to an ``api`` call never sends a secret it did not read
    (:func:`unplace` resolves placeholders wherever they are). ``value`` itself when it holds none."""
    if isinstance(value, str):
        return value.replace("\u2063", "") if "\u2063" in value else value
    if isinstance(value, list):
        return [inert(v) for v in value]
    if isinstance(value, dict):
        return {inert(k): inert(v) for k, v in value.items()}
    return value


def placeholders_in(value: Any) -> list[str]:
    """The names of the secret placeholders ``value`` (JSON) still holds, at any depth (keys included), each
    once: after :func:`unplace`, the secrets with no value here (a replay's stand-in, a forged name)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\u2063" in item:
                found.extend(n for n in _PLACEHOLDER.findall(item) if n not in found)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return found


def secret_reads(text: str) -> list[str]:
    """Names the dynamic string ``text`` reads as ``sys.secret['NAME']``, in order, each once; ``[]``
    for plain text or an expression that does not parse (its use will say why)."""
    found = expression_of(text)
    if found is None:
        return []
    try:
        tree = ast.parse(found[0], mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "secret" and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "sys" and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str) and node.slice.value not in names):
            names.append(node.slice.value)
    return names


def credential_values(kind: str, profile: Any) -> list[tuple[str, str]]:
    """``(field path, value)`` of each credential field of a profile given as a dict or as its model
    (``headers.X-Key``)."""
    out: list[tuple[str, str]] = []
    for name in CREDENTIAL_FIELDS.get(kind, ()):
        value = profile.get(name) if isinstance(profile, dict) else getattr(profile, name, None)
        if isinstance(value, str):
            out.append((name, value))
        elif isinstance(value, dict):
            out.extend((f"{name}.{k}", v) for k, v in value.items() if isinstance(v, str))
    return out


def profile_secret_reads(kind: str, profile: dict[str, Any]) -> list[str]:
    """Every secret name the credential fields of ``profile`` read (see :func:`secret_reads`)."""
    names: list[str] = []
    for _, value in credential_values(kind, profile):
        names.extend(n for n in secret_reads(value) if n not in names)
    return names


#: The password of a URL as SQLAlchemy reads it (``scheme://user:PASSWORD@``: up to the first ``@``, ``/``
#: included) and as an HTTP client reads it (the authority ends at the first ``/``, ``?`` or ``#``, and the
#: user information at its last ``@``). Both are taken: a password either reader sees is masked.
_SQLALCHEMY_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*:([^@]*)@")
_HTTP_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")


def url_secret_spans(url: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the secret parts of URL text ``url`` (SPEC 7.1), in order, not overlapping: its
    password (as either reader of :data:`_SQLALCHEMY_PASSWORD` takes it) and the value of every query
    parameter (``?a=1&b=2``: ``1`` and ``2``; a parameter without ``=`` whole). The query is what follows
    the first ``?``, as SQLAlchemy reads it (a ``#`` fragment stays in the last value)."""
    spans: list[tuple[int, int]] = []
    found = _SQLALCHEMY_PASSWORD.match(url)
    if found:
        spans.append(found.span(1))
    found = _HTTP_AUTHORITY.match(url)
    if found and "@" in found.group(1):
        userinfo = found.group(1).rsplit("@", 1)[0]
        if ":" in userinfo:
            start = found.start(1) + userinfo.index(":") + 1
            spans.append((start, found.start(1) + len(userinfo)))
    question = url.find("?")
    if question >= 0:
        at = question + 1
        for item in url[at:].split("&"):
            equals = item.find("=")
            start = at + equals + 1 if equals >= 0 else at
            spans.append((start, at + len(item)))
            at += len(item) + 1
    spans = sorted((a, b) for a, b in spans if b > a)
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


#: A header value made of an authentication scheme and one token (``Bearer abc``, ``Basic dXM6cHc=``): a server
#: that refuses it often quotes the token alone (``invalid token abc``).
_SCHEME_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9._-]* +(\S+)")


def field_secrets(field: str, text: str) -> list[str]:
    """The secret texts of credential field ``field`` (a name of :data:`CREDENTIAL_FIELDS`; ``headers`` and
    ``query`` for each of their values) holding ``text`` (SPEC 7.1): a URL's password and query values,
    as written and percent-decoded (:data:`URL_FIELDS`); else the whole text, and for a header of a scheme
    and a token (``Bearer abc``) the token too. The one rule every masking of credentials follows."""
    if field not in URL_FIELDS:
        token = _SCHEME_TOKEN.fullmatch(text.strip()) if field == "headers" else None
        return [text, token.group(1)] if token else [text]
    from urllib.parse import unquote, unquote_plus

    out: list[str] = []
    for a, b in url_secret_spans(text):
        part = text[a:b]
        for raw in (part, part.split("#", 1)[0]):
            for form in (raw, unquote(raw), unquote_plus(raw)):
                if form and form not in out:
                    out.append(form)
    return out


def literal_credentials(profiles: Any) -> list[str]:
    """The secret texts (:func:`field_secrets`) of every credential field written literally in ``profiles``
    (the settings' :class:`~.profiles.Profiles`, or its SPEC-10-shaped dict). A field that is an
    expression is left out: what it gives is known once the gateway evaluates it, which masks it then."""
    out: list[str] = []
    for kind in CREDENTIAL_FIELDS:
        named = profiles.get(kind) if isinstance(profiles, dict) else getattr(profiles, kind, None)
        if not isinstance(named, dict):
            continue
        for profile in named.values():
            for path, value in credential_values(kind, profile):
                if expression_of(value) is None:
                    out.extend(field_secrets(path.split(".", 1)[0], value))
    return out


#: ``id(profiles)`` → (a weak reference to them, their :func:`literal_credentials`): settings are never changed in
#: place (a change makes new settings), so what a profiles object writes is read once.
_LITERALS: dict[int, tuple[weakref.ref[Any], tuple[str, ...]]] = {}


def profiles_credentials(profiles: Any) -> tuple[str, ...]:
    """:func:`literal_credentials` of a :class:`~.profiles.Profiles`, read once per object (it is read for every
    text the kernel shows, :meth:`~..settings.Settings.redact`)."""
    key = id(profiles)
    found = _LITERALS.get(key)
    if found is not None and found[0]() is profiles:
        return found[1]
    texts = tuple(literal_credentials(profiles))

    def forget(_: weakref.ref[Any]) -> None:
        _LITERALS.pop(key, None)

    _LITERALS[key] = (weakref.ref(profiles, forget), texts)
    return texts


def shown_value(field: str, value: str) -> str:
    """What ``%profiles`` shows of credential field ``field`` holding ``value``: a URL written literally with
    its password and query values as ``***`` (:func:`url_secret_spans`), anything else (a header or query
    value, a ``key``, a URL that is an expression) as ``***``."""
    if field not in URL_FIELDS or expression_of(value) is not None:
        return MASK
    out, at = [], 0
    for a, b in url_secret_spans(value):
        out.append(value[at:a] + MASK)
        at = b
    return "".join(out) + value[at:]


def _worker_value(value: str) -> str:
    names = secret_reads(value)
    if not names:
        return MASK
    reads = "".join("{sys.secret[" + repr(n) + "]}" for n in names)
    return "{ f" + repr(MASK + reads) + " }"


def worker_settings(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of SPEC-10-shaped settings ``data`` fit for the worker (see the module doc): secrets as
    placeholders, credential fields as ``***`` or an expression naming the secrets they read, and no
    cassette path (SPEC 13: replay happens where calls are made).

    Works on a partial dict too (an ``update_settings`` patch); leaves everything else as it is.
    """
    out = copy.deepcopy(data)
    replay = out.get("replay")
    if isinstance(replay, dict) and replay.get("cassette") is not None:
        out["replay"] = {**replay, "cassette": None}  # the worker never sees a cassette (SPEC 13)
    if out.get("secrets_file") is not None:
        out["secrets_file"] = None  # its secrets are in ``secrets`` already (as placeholders)
    secrets = out.get("secrets")
    if isinstance(secrets, dict):
        out["secrets"] = {name: placeholder(name) if isinstance(name, str) and name.isidentifier() else MASK
                          for name in secrets}
    profiles = out.get("profiles")
    if not isinstance(profiles, dict):
        return out
    for kind, named in profiles.items():
        fields = CREDENTIAL_FIELDS.get(kind, ())
        if not isinstance(named, dict):
            continue
        for profile in named.values():
            if not isinstance(profile, dict):
                continue
            for name in fields:
                value = profile.get(name)
                if isinstance(value, str):
                    profile[name] = _worker_value(value)
                elif isinstance(value, dict):
                    profile[name] = {k: _worker_value(v) if isinstance(v, str) else v for k, v in value.items()}
    return out


def shown_profiles(profiles: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``profiles`` (SPEC-10-shaped, ``{kind: {name: {field: value}}}``) for display: every credential
    field (:data:`CREDENTIAL_FIELDS`) as :func:`shown_value` shows it; ``headers`` and ``query`` keep their
    names."""
    out = copy.deepcopy(profiles)
    for kind, named in out.items():
        if not isinstance(named, dict):
            continue
        for profile in named.values():
            if not isinstance(profile, dict):
                continue
            for name in CREDENTIAL_FIELDS.get(kind, ()):
                value = profile.get(name)
                if isinstance(value, str):
                    profile[name] = shown_value(name, value)
                elif isinstance(value, dict):
                    profile[name] = dict.fromkeys(value, MASK)
    return out


#: ``safe`` characters of the percent-encodings a secret may come back in: every character encoded, a
#: path's (``/`` kept), and what HTTP clients leave in a path (RFC 3986 sub-delims, ``:@``; httpx also
#: keeps ``%``).
_URL_SAFE = ("", "/", "/!$&'()*+,;=:@~", "/!$&'()*+,;=:@~%")


def encoded_forms(text: str) -> set[str]:
    """``text`` and the forms a server may send it back in when it reflects a request as it came
    (SPEC 12: a secret never shows, encoded or not): percent-encoded (:data:`_URL_SAFE`, and ``+`` for
    spaces as in a query) and JSON-escaped (ASCII-only or not)."""
    from urllib.parse import quote, quote_plus

    forms = {text, quote_plus(text), json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    forms.update(quote(text, safe=safe) for safe in _URL_SAFE)
    return forms


class Masker:
    """Replaces sensitive texts with ``***`` in text, JSON values and errors.

    ``Masker(texts)``: every non-empty text of ``texts`` (secret values, evaluated credentials) and its
    encoded forms (:func:`encoded_forms`); shorter than 3 characters is still masked (a value that short
    is the user's choice). Longest first.
    """

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts: list[str] = []
        self.add(texts)

    def add(self, texts: Iterable[str]) -> None:
        """Mask these texts (and their encoded forms) too."""
        forms = {f for t in texts if t and t != MASK for f in encoded_forms(t)}
        self.texts = sorted({*self.texts, *forms}, key=len, reverse=True)

    def text(self, text: str) -> str:
        """``text`` with every sensitive text as ``***``."""
        for secret in self.texts:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def value(self, value: Any) -> Any:
        """A JSON value with every string (keys too) masked, at any depth."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        return value

    def error(self, exc: S2OError) -> S2OError:
        """``exc`` with its message, source and details masked (in place; returns it)."""
        exc.message = self.text(exc.message)
        exc.args = (exc.message,)
        if exc.source is not None:
            exc.source = self.text(exc.source)
        if exc.details is not None:
            exc.details = self.value(exc.details)
        if isinstance(exc, ErrorGroup):
            for inner in exc.errors:
                self.error(inner)
        return exc


@functools.lru_cache(maxsize=16)
def shared_masker(texts: tuple[str, ...]) -> Masker:
    """A :class:`Masker` of ``texts``, made once per distinct tuple (:meth:`~..settings.Settings.redact`
    masks with it on every output). Shared: never :meth:`~Masker.add` to it."""
    return Masker(texts)
