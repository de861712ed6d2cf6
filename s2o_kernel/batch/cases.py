"""The cases of a batch run (SPEC 15): a JSONL file, or a folder of them, one case a line.

A case: ``id`` (text, unique), ``inputs`` (``sys.inputs``), ``query`` (``sys.inputs.query``), ``agent`` and
``conv`` (starting variables), ``cassette`` (a file, relative to the case file's folder; SPEC 13),
``settings`` (merged over the runner's) and ``expect`` (:class:`Expect`). Unknown keys are refused, so a
misspelled expectation never passes silently. Every problem is ``S2OError("batch")`` naming the file and the
line; nothing of a line is quoted (a case file may be any file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from s2o_kernel.bounds import MAX_MAGIC_FILE
from s2o_kernel.engine import S2OError


class Expect(BaseModel):
    """What a case's run must show (SPEC 15); each key optional. ``code`` (a result code; ``success`` when
    neither ``code`` nor ``error`` is given), ``value`` (equal, as JSON), ``value_contains`` (every part of
    it in the value: :func:`..judge.contains`), ``error`` (the error's code), ``outputs_contain`` (texts the
    run's output holds), ``max_cost`` (US dollars), ``max_time`` (seconds)."""

    model_config = ConfigDict(extra="forbid")

    code: str | None = None
    value: Any = None
    value_contains: Any = None
    error: str | None = None
    outputs_contain: list[str] = Field(default_factory=list)
    max_cost: float | None = Field(default=None, ge=0)
    max_time: float | None = Field(default=None, gt=0)


class Case(BaseModel):
    """One case (see the module doc). ``source`` is where it was read (``FILE:LINE``)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    inputs: dict[str, Any] = Field(default_factory=dict)
    query: str | None = None
    agent: dict[str, Any] = Field(default_factory=dict)
    conv: dict[str, Any] = Field(default_factory=dict)
    cassette: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    expect: Expect = Field(default_factory=Expect)
    source: str = ""

    def run_inputs(self) -> dict[str, Any]:
        """``sys.inputs`` of the case's run: its ``inputs``, with ``query`` when given."""
        return {**self.inputs, "query": self.query} if self.query is not None else dict(self.inputs)


def case_files(path: Path) -> list[Path]:
    """The case files ``path`` names: itself, or the ``*.jsonl`` files of a folder, sorted; ``batch`` when none."""
    if path.is_dir():
        files = sorted(p for p in path.glob("*.jsonl") if p.is_file())
        if not files:
            raise S2OError("batch", f"{path}: the folder holds no .jsonl case file")
        return files
    if not path.is_file():
        raise S2OError("batch", f"{path}: no such case file or folder")
    return [path]


def read_cases(path: Path) -> list[Case]:
    """Every case of ``path`` (a file or a folder), in file and line order; a cassette's path made absolute
    (relative to its case file's folder). Raises ``batch`` naming the file and line of the first problem: a
    line that is not a JSON object, a case not of the schema, an ``id`` seen before."""
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for file in case_files(path):
        for number, line in enumerate(_text(file).splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{file}:{number}"
            case = _case(line, where)
            if case.id in seen:
                raise S2OError("batch", f"{where}: the id {case.id!r} is already the id of the case at {seen[case.id]}")
            seen[case.id] = where
            if case.cassette is not None:
                case.cassette = str((file.parent / case.cassette).resolve())
            cases.append(case)
    return cases


def _text(file: Path) -> str:
    try:
        with file.open("rb") as fh:
            data = fh.read(MAX_MAGIC_FILE + 1)
    except OSError as exc:
        raise S2OError("batch", f"{file}: cannot read it: {exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_MAGIC_FILE:
        raise S2OError("batch", f"{file}: larger than {MAX_MAGIC_FILE >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise S2OError("batch", f"{file}: not UTF-8 text") from None


def _case(line: str, where: str) -> Case:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise S2OError("batch", f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise S2OError("batch", f"{where}: a case is a JSON object")
    try:
        return Case.model_validate({**data, "source": where})
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        raise S2OError("batch", f"{where}: {at}: {first['msg']}") from None


def read_agent(path: Path) -> dict[str, Any]:
    """The agent definition in ``path`` (JSON, as ``%run`` reads it); ``batch`` naming the file otherwise."""
    try:
        data = json.loads(_text(path))
    except json.JSONDecodeError as exc:
        raise S2OError("batch", f"{path}:{exc.lineno}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("functions"), dict):
        raise S2OError("batch", f"{path}: an agent definition is a JSON object with its \"functions\"")
    return data
