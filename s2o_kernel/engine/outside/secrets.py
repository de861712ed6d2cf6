"""Secrets at the outside door (SPEC 7.1, 12): which secrets a profile reads, the worker's copy of the
settings, and masking.

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
  could not have had already: any expression may format ``sys.secret['K']`` into a field.
* :class:`Masker`: replaces every secret value and every evaluated credential with ``***`` in text,
  JSON values and errors, longest first (so a secret that contains another is masked whole).
"""

from __future__ import annotations

import ast
import copy
import json
import re
from collections.abc import Iterable
from typing import Any

from ..errors import ErrorGroup, S2OError
from ..language.dynamic import expression_of

#: Profile fields that may hold a credential, per kind (``headers`` and ``query``: each value).
CREDENTIAL_FIELDS: dict[str, tuple[str, ...]] = {
    "api": ("url", "headers", "query"),
    "db": ("url",),
    "llm": ("url", "key"),
    "prompt": (),
}

#: What a credential or a secret value shows as.
MASK = "***"

_PLACEHOLDER = re.compile(r"\u2063s2o-secret:([A-Za-z_][A-Za-z0-9_]*)\u2063")


def placeholder(name: str) -> str:
    """The text that stands for secret ``name`` in the worker (wrapped in INVISIBLE SEPARATOR characters,
    U+2063, which ordinary text does not hold)."""
    return f"\u2063s2o-secret:{name}\u2063"


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


def credential_values(kind: str, profile: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field path, value)`` of each credential field of a profile given as a dict (``headers.X-Key``)."""
    out: list[tuple[str, str]] = []
    for name in CREDENTIAL_FIELDS.get(kind, ()):
        value = profile.get(name)
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


def _worker_value(value: str) -> str:
    names = secret_reads(value)
    if not names:
        return MASK
    reads = "".join("{sys.secret[" + repr(n) + "]}" for n in names)
    return "{ f" + repr(MASK + reads) + " }"


def worker_settings(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of SPEC-10-shaped settings ``data`` fit for the worker (see the module doc): secrets as
    placeholders, credential fields as ``***`` or an expression naming the secrets they read.

    Works on a partial dict too (an ``update_settings`` patch); leaves everything else as it is.
    """
    out = copy.deepcopy(data)
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
    """A copy of ``profiles`` (SPEC-10-shaped, ``{kind: {name: {field: value}}}``) for display: a URL or
    ``key`` that reads a secret, every llm ``key``, every value of ``headers`` and ``query`` (their names
    stay), and the password of a URL, as ``***``."""
    out = copy.deepcopy(profiles)
    for kind, named in out.items():
        if not isinstance(named, dict):
            continue
        for profile in named.values():
            if not isinstance(profile, dict):
                continue
            for name in CREDENTIAL_FIELDS.get(kind, ()):
                value = profile.get(name)
                if isinstance(value, str) and (name == "key" or secret_reads(value)):
                    profile[name] = MASK
                elif isinstance(value, str) and name == "url":
                    profile[name] = _URL_PASSWORD.sub(r"\1***@", value)
                elif isinstance(value, dict):
                    profile[name] = dict.fromkeys(value, MASK)
    return out


_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*:)[^@/]*@")


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
