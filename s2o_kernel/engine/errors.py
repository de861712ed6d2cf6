"""The engine's one error type, :class:`S2OError` (its codes live in :mod:`.codes`).

Errors are data (SPEC sections 3, 6, 10): every refusal or failure the engine
reports is an ``S2OError`` carrying a stable ``code``, a plain-text
``message`` for a person, the 1-based ``line`` and 0-based ``col`` (counted in
characters of the expression) of the offending node when there is one, the
JSON ``path`` of the field inside a fragment, and the ``stage`` at which it
happened (``"load"``, ``"validate"`` or ``"run"``). Callers branch on
``code``, never on the message text.
"""

from __future__ import annotations

from typing import Any

from .codes import STAGES, lookup

__all__ = ["STAGES", "ErrorGroup", "S2OError"]

class S2OError(Exception):
    """A coded error of the engine (SPEC 3, 6, 10, 12).

    Raises :class:`~s2o_kernel.engine.codes.UnknownCode` when ``code`` is not registered in
    :data:`~s2o_kernel.engine.codes.CODES`.

    Attributes:
        code: stable identifier, e.g. ``"underscore"`` or ``"timedOut"``;
            part of the public API.
        message: plain text for a person; never contains a secret's value.
        line: 1-based line in the expression, or ``None``.
        col: 0-based column in characters, or ``None``.
        path: JSON path of the field inside a fragment (e.g.
            ``"var.total"``), or ``None`` for a bare expression.
        stage: ``"load"``, ``"validate"`` or ``"run"``.
        source: the expression text the position refers to, or ``None``.
        details: extra data, e.g. ``{"lines": {LINE: MESSAGE}}`` for an
            allowlist that failed to load; ``None`` when there is none.
        python_type: for ``runtime`` errors, the Python exception's type
            name (``"ZeroDivisionError"``); otherwise ``None``.
    """

    __slots__ = ("code", "col", "details", "line", "message", "path", "python_type", "source", "stage")

    def __init__(
        self,
        code: str,
        message: str,
        *,
        line: int | None = None,
        col: int | None = None,
        path: str | None = None,
        stage: str = "run",
        source: str | None = None,
        details: dict[str, Any] | None = None,
        python_type: str | None = None,
    ) -> None:
        super().__init__(message)
        lookup(code)  # an unregistered code is a bug: UnknownCode
        self.code = code
        self.message = message
        self.line = line
        self.col = col
        self.path = path
        self.stage = stage
        self.source = source
        self.details = details
        self.python_type = python_type

    def with_context(self, *, path: str | None = None, source: str | None = None) -> S2OError:
        """Fill in ``path`` and ``source`` where they are still unknown; returns ``self``."""
        if self.path is None and path is not None:
            self.path = path
        if self.source is None and source is not None:
            self.source = source
        return self

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        where = ""
        if self.line is not None:
            where = f", line={self.line}, col={self.col}"
        if self.path:
            where += f", path={self.path!r}"
        return f"S2OError({self.code!r}, {self.message!r}, stage={self.stage!r}{where})"


class ErrorGroup(S2OError):
    """Several validation errors at once (a fragment reports every problem).

    ``errors`` holds each :class:`S2OError`; the group's own ``code`` and
    position are those of the first one.
    """

    __slots__ = ("errors",)

    def __init__(self, errors: list[S2OError]) -> None:
        first = errors[0]
        extra = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(
            first.code,
            first.message + extra,
            line=first.line,
            col=first.col,
            path=first.path,
            stage=first.stage,
            source=first.source,
            details=first.details,
        )
        self.errors = list(errors)
