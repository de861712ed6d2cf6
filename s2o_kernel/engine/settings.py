"""Settings: one pydantic model with SPEC section 10's names, and where settings come from.

:class:`Settings` holds everything that configures an engine: the allowlist
text, compile rules, limits, ``sys`` values, constants, secrets and
profiles. Unknown keys and values of the wrong type are refused with
``S2OError(code="settings", stage="load")`` whose ``path`` is the dotted key.

:func:`load_settings` reads, in order of preference, the file named by
``S2O_CONFIG``, ``s2o.toml`` in the working directory, or nothing; the file's
values are merged over the embedded default (:func:`default_settings`: the
teaching allowlist, the bounded rewrites of ``**``, ``*`` and ``<<``, a SQLite
database profile and a scripted LLM profile). Secrets also come from
environment variables ``S2O_SECRET_<NAME>``.

Building settings from a dict: :func:`make_settings` merges the dict over the
embedded default, as a file is merged; :func:`bare_settings` starts from the
model's own defaults, SPEC 10's bare defaults (an empty allowlist, every
operator on), which the conformance runner uses (SPEC 11).
"""

from __future__ import annotations

import copy
import functools
import os
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..bounds import (
    DEFAULT_COMPREHENSION_DEPTH,
    DEFAULT_DB_ROWS,
    DEFAULT_DEFINITION_LENGTH,
    DEFAULT_FOR_CLAUSES,
    DEFAULT_LLM_COST,
    DEFAULT_LOOP_ITERATIONS,
    DEFAULT_MEMORY,
    DEFAULT_OUTPUT_BYTES,
    DEFAULT_OUTPUT_PART_BYTES,
    DEFAULT_OUTPUT_PARTS,
    DEFAULT_TIME,
    MAX_OUTPUT_PART,
    MAX_SETTINGS_FILE,
    MIN_MEMORY,
)
from .errors import S2OError
from .language.rules import OPERATOR_SYMBOLS
from .outside.cassette import stand_ins
from .outside.profiles import Profiles
from .outside.secrets import profiles_credentials, shared_masker, shown_profiles
from .run.scopes import check_json
from .spelling import did_you_mean, words_at

OPERATORS = frozenset(OPERATOR_SYMBOLS.values())


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)  # limits are finite


class Rules(_Strict):
    """``rules.*``: compile rules (SPEC 3, 10)."""

    operators: dict[str, str] = Field(default_factory=dict)
    max_comprehension_depth: int = Field(default=DEFAULT_COMPREHENSION_DEPTH, ge=1)
    max_for_clauses: int = Field(default=DEFAULT_FOR_CLAUSES, ge=1)

    @field_validator("operators")
    @classmethod
    def _known_operators(cls, value: dict[str, str]) -> dict[str, str]:
        for symbol, setting in value.items():
            if symbol not in OPERATORS:
                raise ValueError(f"unknown operator {symbol!r}; operators are {' '.join(sorted(OPERATORS))}")
            if not setting:
                raise ValueError(f"operator {symbol!r} needs 'on', 'off' or a function name")
        return value


class Limits(_Strict):
    """``limits.*``: run-time limits (SPEC 6, 10, 12). ``time`` in seconds; ``memory`` and the
    ``output_*_bytes`` caps in bytes (UTF-8 bytes of an output part's text, html or image data).

    ``output_part_bytes`` (1 MiB), ``output_parts`` (1,000) and ``output_bytes`` (16 MiB) cap one
    run's ``output`` parts (SPEC 12; see :mod:`.commands.output`); a part over a cap stops the
    run with ``output-limit``. ``output_part_bytes`` is at most :data:`MAX_OUTPUT_PART`.
    """

    time: float = Field(default=DEFAULT_TIME, gt=0)
    loop_iterations: int = Field(default=DEFAULT_LOOP_ITERATIONS, ge=1)
    db_rows: int = Field(default=DEFAULT_DB_ROWS, ge=1)
    llm_cost: float = Field(default=DEFAULT_LLM_COST, ge=0)
    definition_length: int = Field(default=DEFAULT_DEFINITION_LENGTH, ge=1)
    memory: int = Field(default=DEFAULT_MEMORY, ge=MIN_MEMORY)
    output_part_bytes: int = Field(default=DEFAULT_OUTPUT_PART_BYTES, ge=1, le=MAX_OUTPUT_PART)
    output_parts: int = Field(default=DEFAULT_OUTPUT_PARTS, ge=1)
    output_bytes: int = Field(default=DEFAULT_OUTPUT_BYTES, ge=1)


class SysSettings(BaseModel):
    """``sys.*``: ``inputs`` and the optional members; an optional member is enabled when present."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)  # limits are finite

    inputs: dict[str, Any] = Field(default_factory=dict)
    userEmail: Any = None
    userSession: Any = None
    serverIp: Any = None
    cookies: Any = None

    def enabled(self) -> dict[str, Any]:
        """The optional members that are present, name → value."""
        return {name: getattr(self, name) for name in ("userEmail", "userSession", "serverIp", "cookies")
                if name in self.model_fields_set}


class Replay(_Strict):
    """``[replay]``: record and replay of outside calls (SPEC 13). ``mode`` is ``off`` (no cassette), ``replay``,
    ``record`` or ``rewrite``; ``cassette`` the file's path (relative to the working directory). ``S2O_REPLAY``
    overrides the mode; under ``CI=true`` only ``replay`` runs unless it asks (:mod:`.outside.cassette`)."""

    mode: Literal["off", "replay", "record", "rewrite"] = "off"
    cassette: str | None = None


class Settings(_Strict):
    """Everything that configures an engine (SPEC 10)."""

    allowlist: str = ""
    rules: Rules = Field(default_factory=Rules)
    limits: Limits = Field(default_factory=Limits)
    sys: SysSettings = Field(default_factory=SysSettings)
    const: dict[str, Any] = Field(default_factory=dict)
    allow_unsafe_entries: bool = False
    secrets: dict[str, str] = Field(default_factory=dict)
    secrets_file: str | None = None
    profiles: Profiles = Field(default_factory=Profiles)
    replay: Replay = Field(default_factory=Replay)

    @field_validator("const")
    @classmethod
    def _const_is_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        """``const`` is a JSON object (SPEC 10): a TOML ``nan``, ``inf`` or date showed as ``null`` in ``%sys``."""
        try:
            check_json(value, "const", "constants")
        except S2OError as exc:
            raise ValueError(f"{exc.message} (SPEC 10)") from None
        return value

    def to_dict(self) -> dict[str, Any]:
        """The settings as a SPEC-10-shaped dict that :func:`bare_settings` turns back into equal
        settings (optional ``sys`` members only when enabled)."""
        data = self.model_dump(mode="python", exclude={"sys"})
        data["sys"] = {"inputs": copy.deepcopy(self.sys.inputs), **copy.deepcopy(self.sys.enabled())}
        return data

    def masked_dict(self) -> dict[str, Any]:
        """The settings as a JSON-ready SPEC-10-shaped dict for display: every secret value is ``***``, and
        so is every profile credential (SPEC 7.1: a header or query value, an llm ``key``, a URL that reads
        a secret, a URL's password and query values; :func:`~.outside.secrets.shown_profiles`)."""
        data = self.model_dump(mode="json", exclude={"sys"})
        data["sys"] = {"inputs": self.sys.inputs, **self.sys.enabled()}
        data["secrets"] = {name: "***" for name in data.get("secrets", {})}
        data["profiles"] = shown_profiles(data.get("profiles", {}))
        return data

    def same_outside(self, other: Settings) -> bool:
        """Whether ``other`` has the same profiles, secrets and replay settings, so a gateway made over these
        settings serves it unchanged (SPEC 7.1, 13; a session closes its gateway's pools otherwise)."""
        return (self.profiles, self.secrets, self.replay) == (other.profiles, other.secrets, other.replay)

    def sensitive_texts(self) -> tuple[str, ...]:
        """Every text these settings know to be secret, without running anything: the secrets' values and
        the credentials the profiles write literally (:func:`~.outside.secrets.literal_credentials`; SPEC 7.1).
        A credential field that is an expression adds what it gives when the gateway evaluates it."""
        return (*self.secrets.values(), *profiles_credentials(self.profiles))

    def redact(self, text: str) -> str:
        """``text`` with every sensitive text (:meth:`sensitive_texts`), and the encoded forms a server
        sends one back in, replaced by ``***`` (for messages, outputs and displayed values)."""
        return shared_masker(self.sensitive_texts()).text(text)


def _error_from_validation(exc: ValidationError) -> S2OError:
    problems = []
    first_path = None
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"])
        first_path = first_path or path
        if err["type"] == "extra_forbidden":
            key = err["loc"][-1]
            hint = did_you_mean(key, words_at(Settings, err["loc"][:-1])) if isinstance(key, str) else ""
            problems.append(f"unknown setting '{path}'{hint}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{path}: {msg}")
    return S2OError("settings", "; ".join(problems), path=first_path, stage="load",
                    details={"problems": problems})


def bare_settings(data: dict[str, Any]) -> Settings:
    """Build :class:`Settings` from a SPEC-10-shaped dict over SPEC 10's *bare* defaults: what
    ``data`` leaves out is the model's default (an empty allowlist, every operator on, no profiles),
    not the embedded default. For complete settings (``Settings.to_dict()``, a file already merged)
    and for the conformance runner (SPEC 11: an absent allowlist means an empty one).

    Under replay (SPEC 13) the secrets the cassette and the profiles name but ``data`` does not hold are
    added as stand-ins (:func:`~.outside.cassette.stand_ins`), so a recorded agent replays with no keys.

    Raises ``S2OError(code="settings", stage="load")`` naming each unknown key or wrong value.
    """
    if not isinstance(data, dict):
        raise S2OError("settings", "settings must be an object", stage="load")
    named = data.get("secrets_file")
    if isinstance(named, str) and named:
        given = data.get("secrets")
        data = {**data, "secrets": {**read_secrets_file(named), **(given if isinstance(given, dict) else {})}}
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise _error_from_validation(exc) from None
    missing = stand_ins(settings.replay.mode, settings.replay.cassette, settings.secrets,
                        lambda: settings.profiles.model_dump())
    if missing:  # replaying without the keys a recording read (SPEC 13)
        settings = settings.model_copy(update={"secrets": {**settings.secrets, **missing}})
    return settings


def make_settings(data: dict[str, Any]) -> Settings:
    """Build :class:`Settings` from a SPEC-10-shaped dict merged over the embedded default, as a
    settings file is (:func:`load_settings`, SPEC 9): ``make_settings({"limits": {"time": 1}})`` keeps
    the teaching allowlist, the bounded rewrites and the offline profiles and changes the time limit.
    Objects merge key by key (:func:`merge`); write ``"allowlist": ""`` for an empty allowlist, or use
    :func:`bare_settings` to start from nothing.

    Raises ``S2OError(code="settings", stage="load")`` naming each unknown key or wrong value.
    """
    if not isinstance(data, dict):
        raise S2OError("settings", "settings must be an object", stage="load")
    return bare_settings(merge(default_data(), data))


def merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``patch`` over ``base``: objects merge key by key (``secrets`` too, so a patch adds
    secrets); ``sys.inputs``, ``const`` and anything that is not an object replace."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in ("inputs", "const"):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@functools.cache
def _default_text() -> str:
    return resources.files(__package__).joinpath("default.toml").read_text(encoding="utf-8")


def default_data() -> dict[str, Any]:
    """The embedded default configuration as a dict (``s2o_kernel/engine/default.toml``), a fresh copy."""
    return tomllib.loads(_default_text())


def default_settings() -> Settings:
    """The embedded default (SPEC 9): teaching allowlist, bounded rewrites, offline profiles."""
    return bare_settings(default_data())


#: What an environment switch (``S2O_KERNEL_ISOLATED``, ``S2O_CONFINE``, ``S2O_CODE_CACHE``) is set to
#: to turn its feature off, in any case and with spaces around.
OFF_WORDS = ("0", "false", "no", "off")


def switched_off(value: str) -> bool:
    """Whether an environment switch's ``value`` turns its feature off (:data:`OFF_WORDS`)."""
    return value.strip().lower() in OFF_WORDS


def _toml_problem(exc: tomllib.TOMLDecodeError, source: str) -> tuple[str, int | None, int | None]:
    """What is wrong, without quoting the file: tomllib's description when it quotes nothing (some
    quote a key or a character of the file), and the 1-based line and column when known (at the end
    of the document: where ``source`` ends)."""
    text = str(exc)
    line, col = getattr(exc, "lineno", None), getattr(exc, "colno", None)  # Python 3.14+
    found = re.fullmatch(r"(.*) \(at (?:line (\d+), column (\d+)|end of document)\)", text, re.DOTALL)
    if found is not None:
        text = found.group(1)
        if line is None and found.group(2) is not None:
            line, col = int(found.group(2)), int(found.group(3))
        elif line is None:
            line, col = source.count("\n") + 1, len(source) - (source.rfind("\n") + 1) + 1
    if found is None or re.search("['\"(]", text):
        text = "a syntax error"
    return text, line, col


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a settings file (SPEC 10).

    Raises ``S2OError(code="settings", stage="load")`` when it cannot be read, is larger than
    :data:`MAX_SETTINGS_FILE` bytes, is not UTF-8, or is not TOML. The message says what is wrong
    and where (line and column) without quoting the file, which may be any file (``%config FILE``).
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SETTINGS_FILE + 1)
    except OSError as exc:
        raise S2OError("settings", f"cannot read {path}: {exc.strerror or type(exc).__name__}",
                       stage="load") from None
    if len(data) > MAX_SETTINGS_FILE:
        raise S2OError("settings", f"{path} is too large for a settings file (over {MAX_SETTINGS_FILE >> 20} MiB)",
                       stage="load")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise S2OError("settings", f"{path} is not a settings file: it is not UTF-8 text", stage="load") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        what, line, col = _toml_problem(exc, text)
        where = f" (line {line}, column {col})" if line is not None and col is not None else " (at its end)"
        raise S2OError("settings", f"{path} is not valid TOML: {what}{where}", stage="load", line=line,
                       col=None if col is None else max(col - 1, 0)) from None


def read_secrets_file(path: str) -> dict[str, str]:
    """The secrets of a ``secrets_file`` (SPEC 10): TOML ``NAME = "value"`` lines, read at load and never
    shown. Raises ``S2OError`` ``settings`` (stage ``load``) naming the file and, for a value that is not
    text or a name that is not one, the key, never a value or a line of the file."""
    data = read_toml(path)
    problems = [name for name, value in data.items() if not isinstance(value, str) or not name.isidentifier()]
    if problems:
        raise S2OError("settings", f"secrets_file {path}: each line is NAME = \"value\"; not so for "
                       f"{', '.join(repr(p[:40]) for p in problems[:5])}", path="secrets_file", stage="load")
    return data


def env_secrets(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Secrets from ``S2O_SECRET_<NAME>`` environment variables, name → value."""
    env = os.environ if environ is None else environ
    return {k[len("S2O_SECRET_"):]: v for k, v in env.items() if k.startswith("S2O_SECRET_") and len(k) > 11}


def config_path(cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The settings file in use: ``$S2O_CONFIG``, else ``./s2o.toml`` if it exists, else ``None``."""
    named = os.environ.get("S2O_CONFIG")
    if named:
        return Path(named)
    candidate = Path(cwd or os.getcwd()) / "s2o.toml"
    return candidate if candidate.is_file() else None


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load settings for a kernel or tool (SPEC 9, 10).

    ``path`` (or ``$S2O_CONFIG``, or ``./s2o.toml``) is merged over the
    embedded default; environment secrets are added. Raises ``S2OError``
    with stage ``load`` when the file is unreadable or a setting is refused.
    """
    data = default_data()
    file = Path(path) if path is not None else config_path()
    if file is not None:
        data = merge(data, read_toml(file))
    extra = env_secrets()
    if extra:
        data["secrets"] = {**data.get("secrets", {}), **extra}
    return bare_settings(data)
