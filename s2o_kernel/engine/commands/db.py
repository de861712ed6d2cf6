"""``db``: SQL through a database profile; ``result`` is a list of row dicts (SPEC 7, 7.1).

Fields: ``profile`` (a name under ``profiles.db``), ``sql`` (literal text: a dynamic string there is
refused at validation, since values go only through ``params``, bound by the driver) and ``params``
(an object of dynamic values). Validation refuses an unknown profile and a profile reading a secret that
is not available. More rows than ``limits.db_rows`` stop the run with ``row-limit`` before they are all
read (``onError`` does not handle it); ``db-failed`` and ``db-read-only`` are handled by ``onError`` or
end the run with ``callFailed``. ``db`` produces a result, so it may carry ``outputPath`` (SPEC 8).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..fragments.tree import Command, join
from ..language.dynamic import expression_of
from .protocols import Interpreter, Parser
from .spec import CommandSpec, FieldsModel, parse_profile


class DbFields(FieldsModel):
    """``db``'s fields (see the module doc)."""

    profile: str = Field(strict=True)
    sql: str = Field(strict=True)
    params: dict[str, Any] = Field(default_factory=dict)


def parse(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check the profile, refuse a dynamic ``sql``, check the parameters' expressions."""
    m = p.model(DbFields, fields, cmd.path)
    if m is None:
        return None
    parse_profile(p, "db", m.profile, join(cmd.path, "profile"))
    if expression_of(m.sql) is not None:
        p.error("fragment", "sql is literal text, never an expression: pass values in params "
                "(\"sql\": \"... WHERE id = :id\", \"params\": {\"id\": \"{ order_id }\"})", join(cmd.path, "sql"))
    for name, value in m.params.items():
        p.value(value, join(join(cmd.path, "params"), name), known)
    cmd.model = m
    return cmd


async def run(it: Interpreter, cmd: Command) -> None:
    """Evaluate the parameters, run the SQL, set ``result``."""
    m = cmd.model
    params = {name: await it.value(value, join(join(cmd.path, "params"), name)) for name, value in m.params.items()}
    fields = {"sql": m.sql, "params": params, "max_rows": it.limits.db_rows}
    it.session.set_result(await it.outside("db", m.profile, fields, cmd.path))


DB = CommandSpec("db", parse, run, fields=DbFields, produces_result=True)
