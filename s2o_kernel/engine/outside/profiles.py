"""Profiles (SPEC 7.1, 10): the only way out of a run, one pydantic model per kind.

``profiles.api|db|llm|prompt.NAME`` in the settings. Every model refuses unknown fields, so a
misspelt field is a ``settings`` error at load with its dotted path (``profiles.api.crm.timout``).
String fields marked *dynamic* may be dynamic strings (SPEC 1) that read ``sys.secret['NAME']``; they
are evaluated where the call is made, never in the worker. Prompt text is always literal. The credential
fields (:data:`~.secrets.CREDENTIAL_FIELDS`: ``headers`` and ``query`` values, an llm ``key``, a URL's
password and query values) are secrets whether they read one or are written literally (SPEC 7.1).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...bounds import DEFAULT_API_TIMEOUT, DEFAULT_MAX_RESPONSE


class _Profile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ApiProfile(_Profile):
    """``profiles.api.NAME``: ``url`` (base URL, dynamic), ``headers`` and ``query`` (maps of dynamic
    strings), ``timeout`` (seconds, default 30), ``allow_path`` (a command may add a path; default true),
    ``allow_headers`` (a command may add headers; default false), ``max_response_bytes`` (bytes)."""

    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    query: dict[str, str] = Field(default_factory=dict)
    timeout: int = Field(default=DEFAULT_API_TIMEOUT, ge=1)
    allow_path: bool = True
    allow_headers: bool = False
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE, ge=1)


class DbProfile(_Profile):
    """``profiles.db.NAME``: ``url`` (a SQLAlchemy URL, dynamic) and ``read_only`` (refuse writes)."""

    url: str
    read_only: bool = False


class ScriptTurn(_Profile):
    """One turn of a ``scripted`` model (SPEC 7.1): ``text``, or ``call`` (a function name) with
    ``args``; token counts optional (else one token per four characters, rounded up)."""

    text: str | None = None
    call: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)


class LlmProfile(_Profile):
    """``profiles.llm.NAME``: ``adapter`` (``scripted`` or ``openai``), ``model``, ``url`` and ``key``
    (dynamic; for ``openai``), ``price_input`` / ``price_output`` (US dollars per million tokens),
    ``max_tokens``, ``max_response_bytes`` (bytes of one reply's text and tool-call arguments together, default
    10 MiB; ``llm-too-large`` past it), and ``script`` (the ``scripted`` adapter's turns)."""

    adapter: Literal["scripted", "openai"] = "scripted"
    model: str = "scripted"
    url: str | None = None
    key: str | None = None
    price_input: float = Field(default=0.0, ge=0)
    price_output: float = Field(default=0.0, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE, ge=1)
    script: list[ScriptTurn] = Field(default_factory=list)


class PromptProfile(_Profile):
    """``profiles.prompt.NAME``: ``text``, literal (never an expression)."""

    text: str


class Profiles(_Profile):
    """``profiles.*``: name → profile, per kind."""

    api: dict[str, ApiProfile] = Field(default_factory=dict)
    db: dict[str, DbProfile] = Field(default_factory=dict)
    llm: dict[str, LlmProfile] = Field(default_factory=dict)
    prompt: dict[str, PromptProfile] = Field(default_factory=dict)
