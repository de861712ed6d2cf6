"""The results of a batch run (SPEC 15): one JSON line per case, the summary and JUnit XML.

:class:`ResultsFile` appends each case's line as the case ends and flushes it, so a run that crashes loses
no finished case; :func:`read_results` reads such a file back for ``--resume`` and ``--rerun-failed`` (a
last line cut by the crash is ignored; a later line of the same id wins). A line: ``id``, ``outcome``
(``pass``, ``fail``, ``error``), ``diff`` (what differed, in words), ``code`` (the run's result code),
``error`` (its error's code, or ``null``), ``duration`` (seconds), ``cost`` (US dollars) and ``trace``
(SPEC 14; ``null`` when the run kept none).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import IO, Any

from s2o_kernel.engine import S2OError


class ResultsFile:
    """The results file, open for appending (``ResultsFile(path)``); :meth:`write` one case's line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            cut = path.exists() and path.stat().st_size > 0 and _last_byte(path) != b"\n"
            self._file: IO[str] = path.open("a", encoding="utf-8")
            if cut:  # a line a crash cut short stays a line of its own, which readers skip
                self._file.write("\n")
        except OSError as exc:
            raise S2OError("batch", f"{path}: cannot write the results: {exc.strerror or type(exc).__name__}") \
                from None

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` as one line and flush it."""
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def _last_byte(path: Path) -> bytes:
    with path.open("rb") as fh:
        fh.seek(-1, 2)
        return fh.read(1)


def read_results(path: Path) -> dict[str, dict[str, Any]]:
    """id → the last line of that id in the results file ``path`` (none when it does not exist). A line that is
    not a JSON object with a text ``id`` is skipped: the last line of a run that crashed may be cut short."""
    if not path.exists():
        return {}
    found: dict[str, dict[str, Any]] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise S2OError("batch", f"{path}: cannot read the results: {exc.strerror or type(exc).__name__}") from None
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("id"), str):
            found[record["id"]] = record
    return found


def summary(records: list[dict[str, Any]]) -> str:
    """The summary printed at the end: counts by outcome, spend, time percentiles, then each failing or erring
    case with what differed."""
    counts = {o: sum(1 for r in records if r.get("outcome") == o) for o in ("pass", "fail", "error")}
    times = sorted(float(r.get("duration") or 0.0) for r in records)
    spend = sum(float(r.get("cost") or 0.0) for r in records)
    lines = [f"{len(records)} cases: {counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors; "
             f"spend ${spend:.6f}"]
    if times:
        p50 = statistics.median(times)
        p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
        lines.append(f"time a case: median {p50:.3f} s, 90th percentile {p90:.3f} s, longest {times[-1]:.3f} s")
    for record in records:
        if record.get("outcome") != "pass":
            what = "; ".join(record.get("diff") or [])
            lines.append(f"{str(record.get('outcome', '?')).upper()} {record.get('id')}: {what}")
    return "\n".join(lines)


def write_junit(records: list[dict[str, Any]], path: Path, name: str) -> None:
    """JUnit XML of ``records`` at ``path``: one test suite ``name``, a test case per case (its duration), a
    failure for ``fail`` and an error for ``error`` carrying what differed."""
    from junitparser import Error, Failure, JUnitXml, TestCase, TestSuite

    suite = TestSuite(name)
    for record in records:
        case = TestCase(str(record.get("id")), classname=name, time=float(record.get("duration") or 0.0))
        text = "; ".join(record.get("diff") or [])
        if record.get("outcome") == "fail":
            case.result = [Failure(text[:2000], type_=str(record.get("code")))]
        elif record.get("outcome") == "error":
            case.result = [Error(text[:2000], type_=str(record.get("code")))]
        suite.add_testcase(case)
    xml = JUnitXml()
    xml.add_testsuite(suite)
    try:
        xml.write(str(path))
    except OSError as exc:
        raise S2OError("batch", f"{path}: cannot write the JUnit XML: {exc.strerror or type(exc).__name__}") from None
