"""The registry of every error and result code: one home for names, stages, SPEC sections and meanings.

Codes are part of the public API (SPEC 3). Every :class:`~s2o_kernel.engine.errors.S2OError`
carries one of the codes below; constructing one with a code that is not registered raises
:class:`UnknownCode` (a programming error, caught by the tests, never shown to a user). The
kernel renders errors by code, the tests judge containment by code, and ``docs/codes.md`` is
generated from this table (``python -m s2o_kernel.engine.codes``).

Shape: :data:`CODES` maps a code name to a :class:`Code` with

* ``stages``: the stages at which the code may be raised, a subset of
  ``{"load", "validate", "run", "result"}`` (``result`` is a run's result code,
  SPEC 7; ``load`` covers settings and allowlists, SPEC 10; ``validate`` is the
  compile rules and fragment checks, SPEC 3 and 7; ``run`` is while running, SPEC 3 and 6);
* ``section``: the SPEC section that defines it, e.g. ``"3"`` or ``"7.1"``;
* ``meaning``: one line for a person.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

LOAD, VALIDATE, RUN, RESULT = "load", "validate", "run", "result"
#: The stages an :class:`S2OError` may carry (``result`` is for :class:`RunResult` codes only).
STAGES = (LOAD, VALIDATE, RUN)


class UnknownCode(ValueError):
    """An error was built with a code that is not in :data:`CODES` (a bug in the engine or kernel)."""


@dataclass(frozen=True, slots=True)
class Code:
    """One registered code: its name, the stages it is raised at, its SPEC section and meaning."""

    name: str
    stages: frozenset[str]
    section: str
    meaning: str


def _table(*rows: tuple[str, str, str, str]) -> dict[str, Code]:
    out: dict[str, Code] = {}
    for name, stages, section, meaning in rows:
        if name in out:  # pragma: no cover - caught at import by the tests
            raise UnknownCode(f"code {name!r} registered twice")
        out[name] = Code(name, frozenset(stages.split()), section, meaning)
    return out


#: Every code, in the order the docs list them: name, stages, SPEC section, meaning.
CODES: dict[str, Code] = _table(
    # -- compile rules (SPEC 3, 3.1, 12) --------------------------------------------------------
    ("syntax", "validate", "3", "text that is not one Python expression (or, in a cell, not JSON)"),
    ("underscore", "validate run", "3", "a name, attribute or keyword starting with '_'"),
    ("format", "validate run", "3", "the attribute format or format_map"),
    ("lambda", "validate", "3", "a lambda expression"),
    ("walrus", "validate", "3", "an assignment expression ':='"),
    ("call-target", "validate", "3", "a call whose callee is not a plain name or an attribute"),
    ("non-ascii", "validate", "3", "a character outside printable ASCII, tab, newline and return"),
    ("comprehension-depth", "validate", "3", "comprehensions nested deeper than the limit"),
    ("comprehension-clauses", "validate", "3", "more for clauses in one comprehension than the limit"),
    ("operator", "validate", "3", "an operator the configuration turns off"),
    ("sys", "validate", "3", "sys used other than as sys.<member>"),
    ("sys-member", "validate", "3", "a member of sys that this configuration does not have"),
    ("secret-key", "validate", "3", "sys.secret not subscripted with a literal string"),
    ("command-field", "validate", "3", "command.<field> for a field not set earlier in the command"),
    ("unknown-name", "validate", "3", "a name that is no argument, local, namespace or allowlist name"),
    ("missing-secret", "validate", "3", "sys.secret['NAME'] where no secret NAME is available"),
    ("attribute", "validate run", "3.1", "an attribute that leads to frames, code, globals or imports"),
    ("too-long", "validate run", "6", "an expression or fragment longer than the definition-length limit"),
    ("too-deep", "validate run", "12",
     "nesting deeper than the validator or runner accepts (or a worker's message, or an outside call it asks for)"),
    ("not-awaited", "validate run", "6", "an async call inside a larger expression without await"),
    ("node", "validate", "3", "a Python syntax node that no compile rule admits (default deny)"),
    # -- fragments (SPEC 7) -------------------------------------------------------------------
    ("fragment", "validate", "7", "a fragment whose shape is wrong (unknown command, field or type)"),
    ("loop-control", "validate", "7", "break or continue outside a loop"),
    ("unknown-function", "validate", "7", "a call to a function the agent does not define"),
    ("recursion", "validate", "7", "functions that call themselves, directly or through others"),
    ("argument", "validate run", "7", "a call's arguments that do not match the function's args"),
    ("failCommand", "run result", "7", "a fail command ended the run"),
    # -- running (SPEC 3, 6, 9) ----------------------------------------------------------------
    ("not-allowed", "run", "3", "a name under a granted module that the allowlist does not give"),
    ("not-set", "run", "3", "an agent, conversation, const or local variable that was never set"),
    ("not-json", "run", "5", "a value stored in agent or conv that JSON cannot hold"),
    ("runtime", "run", "3", "any other Python error; the message starts with its type name"),
    ("timedOut", "run result", "6", "the run took longer than the time limit"),
    ("loop-limit", "run", "6", "a loop ran more iterations than the loop limit"),
    ("row-limit", "run", "6", "a db command returned more rows than the row limit"),
    ("cost-limit", "run", "6", "the run's LLM spend passed the cost limit"),
    ("memory-limit", "run", "6", "an evaluation held more memory than the memory limit"),
    ("output-limit", "run", "12",
     "a run's output passed a cap: bytes per part, parts, or bytes per run (printed text and log lines count)"),
    ("stopped", "run result", "9", "the run was interrupted; the session keeps its variables"),
    # -- the outside world (SPEC 7.1) ------------------------------------------------------------
    ("unknown-profile", "validate run", "7.1", "a command names a profile the settings do not define"),
    ("api-status", "run", "7.1", "an api call answered with a status outside 200-299 (exc.status, exc.body)"),
    ("api-failed", "run", "7.1", "an api call could not connect or the connection failed"),
    ("api-timeout", "run", "7.1", "an api call took longer than its timeout"),
    ("api-too-large", "run", "7.1", "an api response (or a call's fields) larger than the profile's "
     "max_response_bytes allows, in bytes or decoded"),
    ("db-failed", "run", "7.1", "the database refused the statement or the connection (the driver's message)"),
    ("db-read-only", "run", "7.1", "a write statement through a read_only database profile"),
    ("db-too-large", "run", "7.1", "a db command's result, or one of its values, larger than the kernel holds"),
    ("llm-failed", "run", "7.1", "the model server refused or failed a call, or its answer broke the protocol"),
    ("llm-too-large", "run", "7.1", "an llm reply (its text and tool-call arguments together) larger than the "
     "profile's max_response_bytes allows, in bytes or decoded"),
    ("llm-turns", "run", "7.1", "an llm command's model asked for tools more times than an llm command allows"),
    ("ask-answer", "run", "7.1", "an answer to an ask input that does not fit its type or options"),
    # -- record and replay (SPEC 13) -------------------------------------------------------------
    ("replay-miss", "run", "13", "under replay, a call the cassette holds no answer to (the closest entry and "
     "the fields that differ are named)"),
    ("replay-exhausted", "run", "13", "under replay, a call whose every recorded answer was already used"),
    ("cassette-secret", "run", "13", "a cassette would hold a secret value, plain or encoded: nothing is written"),
    ("cassette", "run", "13", "a cassette file that cannot be read or is not a cassette"),
    ("replay-mode", "load run", "13", "a replay mode that is not replay, record, rewrite or off, or one that "
     "makes real calls under CI=true"),
    # -- the run trace (SPEC 14) ----------------------------------------------------------------
    ("trace", "run", "14", "a trace that cannot be shown, saved or exported: no run kept one, a file that cannot "
     "be written, or the OpenTelemetry extra missing for a protobuf export"),
    # -- batch runs (SPEC 15) -------------------------------------------------------------------
    ("batch", "load", "15", "a batch's agent or case file that cannot be read or is not of the schema (the file and "
     "line are named)"),
    # -- loading settings (SPEC 10, 12) --------------------------------------------------------
    ("settings", "load", "10", "a setting that cannot be used"),
    ("allowlist", "load", "4", "an allowlist line that cannot be loaded"),
    ("refused-entry", "load", "12", "an allowlist entry refused as dangerous in itself, or holding such a value"),
    # -- results of a run (SPEC 7) -------------------------------------------------------------
    ("success", "result", "7", "the run ended normally"),
    ("errorInAgent", "result", "7", "an error in the agent ended the run"),
    ("ask", "run result", "7", "the run waits for a person's answers (nobody can answer here)"),
    ("callFailed", "result", "7", "an outside call failed and nothing handled it"),
    ("unexpected", "run result", "7", "a fault of the engine or its worker, not of the expression"),
    ("worker-protocol", "run", "12",
     "a message to or from the worker broke the framed protocol (wrong id or shape, not JSON, cut short, an "
     "outside call it cannot make, stopping unasked) or its bounds (bytes, values)"),
    # -- reference expressions (SPEC 8) ----------------------------------------------------------
    ("ref-text", "validate", "8",
     "text beside a reference: a field that starts with \u2020 holds references joined by || or && only"),
    ("ref-scope", "validate", "8", "a reference whose scope is not local, agent, conv, sys.inputs or result"),
    ("ref-path", "validate", "8", "a reference whose key or index after the scope is malformed or missing"),
    ("ref-operator", "validate", "8", "a single '|' or '&' where '||' or '&&' is meant"),
    ("ref-mixed", "validate", "8", "'||' and '&&' mixed at one level without parentheses"),
    ("ref-empty", "validate", "8", "an operator or parentheses with an empty operand"),
    ("ref-paren", "validate", "8", "unbalanced parentheses in a reference expression"),
    ("ref-output", "validate", "8",
     "an outputPath that is no writable reference expression, or on a command that produces no result"),
    # -- the kernel (SPEC 9) -------------------------------------------------------------------
    ("magic", "run", "9.1", "a magic that does not exist or was given wrong arguments"),
)


def lookup(name: object) -> Code:
    """The :class:`Code` registered as ``name``; raises :class:`UnknownCode` for anything else.

    ``name`` must be an exact ``str`` (a subclass is refused: guards never trust the type of
    what they are handed).
    """
    if type(name) is not str or name not in CODES:
        raise UnknownCode(f"unregistered error code {name!r}")
    return CODES[name]


def markdown_table() -> str:
    """The registry as a Markdown table (``docs/codes.md``), one row per code in registry order."""
    rows = ["| code | stages | SPEC | meaning |", "|---|---|---|---|"]
    order = {LOAD: 0, VALIDATE: 1, RUN: 2, RESULT: 3}
    for code in CODES.values():
        stages = ", ".join(sorted(code.stages, key=order.__getitem__))
        rows.append(f"| `{code.name}` | {stages} | {code.section} | {code.meaning} |")
    return "\n".join(rows) + "\n"


def main() -> int:
    """Print ``docs/codes.md``: a title, a note that it is generated, and :func:`markdown_table`."""
    sys.stdout.write(
        "# Error and result codes\n\n"
        "Generated from `s2o_kernel/engine/codes.py` by `python -m s2o_kernel.engine.codes`;\n"
        "a test checks that this file matches the registry. Codes are part of the public API.\n\n"
        + markdown_table()
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
