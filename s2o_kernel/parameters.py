"""papermill parameters for s2o notebooks: the ``s2o`` translator (issue 11).

``papermill in.ipynb out.ipynb -p name value -y "{...}"`` writes the parameters into the notebook
as one cell that a language understands. For the ``s2o`` kernel and language that cell is the
``%%parameters`` magic around one ``var`` fragment (SPEC 7): a local variable per parameter, each also
merged into ``sys.inputs``, where an agent definition's ``main`` takes its arguments::

    # Parameters
    %%parameters
    {
      "var": {
        "name": "Ada",
        "count": 3
      }
    }

Parameters are data (SPEC 8): values are JSON of every type (str, int, float, bool, None, list,
dict) and stay exactly the values given, whatever they hold. A string that a fragment could read as
anything but itself, one in braces (an expression, SPEC 1) or one holding a dagger ``\u2020``
anywhere (a reference expression, SPEC 8), is written as the expression of its Python string literal
(``"{ '{x}' }"``, ``"{ '\\u2020agent.token' }"``; ASCII only, as SPEC 3 wants an expression), at
any depth; dict keys are never read as either. A name is one local variable: a Python identifier
(``agent.token`` or ``x['k']`` would name another scope or an item, so they are refused). A name
that is not one, or a value JSON cannot hold (NaN, an infinity, a date from YAML, ...), raises
``ValueError`` naming the parameter; papermill stops with it. The whole cell counts toward
``limits.definition_length`` (20,480 characters by default) like any fragment.

Registration: papermill 2.7 has no entry point for translators, only for engines
(``papermill.engine``) and I/O handlers (``papermill.io``), and it loads those when it is imported.
The package declares an engine entry point ``s2o`` (``S2OEngine``, papermill's own nbclient engine
unchanged), so papermill imports this module at start and the ``register`` call below runs; ``-p``
then works with papermill's default engine. ``papermill --help-notebook`` lists the names and
defaults of a ``var`` fragment in the cell tagged ``parameters`` (:meth:`S2OTranslator.inspect`).

Import order: ``import papermill`` loads the entry points, which import this module and ask it for
``S2OEngine``; importing this module first imports papermill, which asks this module, half imported,
for that name. So ``S2OEngine`` is made when it is first asked for (:func:`__getattr__`, PEP 562),
from papermill's ``NBClientEngine``, which papermill defines before it loads its entry points:
either may be imported first.
"""

from __future__ import annotations

import ast
import json
import math
from typing import Any


def __getattr__(name: str) -> Any:
    """``S2OEngine``: papermill's nbclient engine, unchanged, made on first use (see the module doc).

    It exists for its entry point (``--engine s2o`` is the same as the default): papermill imports the
    engines' modules when it starts, which registers :class:`S2OTranslator`. Defined before this module
    imports papermill, so papermill may ask for it while this module is half imported. Raises
    ``AttributeError`` for any other name.
    """
    if name != "S2OEngine":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from papermill.engines import NBClientEngine

    made = globals().get(name)
    if made is None:
        made = type(name, (NBClientEngine,), {"__module__": __name__, "__doc__": "papermill's nbclient engine, "
                                             "unchanged: the s2o entry point (s2o_kernel.parameters)."})
        globals()[name] = made
    return made


from papermill.models import Parameter  # noqa: E402  # after __getattr__, which papermill's import may ask
from papermill.translators import Translator, papermill_translators  # noqa: E402

#: The kernel's name and language (kernelspec/kernel.json): papermill looks a translator up by either.
LANGUAGE = "s2o"
#: The first line of the cell the translator writes: the kernel's ``%%parameters`` magic, which sets each
#: parameter as a local variable and merges it into ``sys.inputs`` (where an agent's ``main`` takes it).
MAGIC_LINE = "%%parameters"
#: The character that starts a reference expression (SPEC 8; the engine's ``references.DAGGER``, written
#: here so that papermill's start does not import the engine).
DAGGER = "\u2020"


def _read_as_itself(text: str) -> bool:
    """Whether a fragment reads the string ``text`` as the text itself: not in braces (SPEC 1) and no
    dagger anywhere (SPEC 8; wider than the engine's rule, so no reading of a reference can apply)."""
    return not (text.startswith("{") and text.endswith("}")) and DAGGER not in text


def _literal(value: Any, where: str) -> Any:
    """``value`` as fragment JSON that sets exactly ``value``; ``ValueError`` when it is not JSON."""
    if type(value) is str:
        return value if _read_as_itself(value) else "{ " + ascii(value) + " }"
    if isinstance(value, str):  # a str subclass from YAML or a caller: its plain text, never its methods
        return _literal(str.__str__(value), where)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"s2o parameter {where} is {value!r}, which JSON cannot hold")
        return value
    if isinstance(value, (list, tuple)):
        return [_literal(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"s2o parameter {where} has the key {key!r}; JSON keys are strings")
            out[key] = _literal(item, f"{where}[{key!r}]")
        return out
    raise ValueError(f"s2o parameter {where} is a {type(value).__name__}; parameters are JSON values")


def _value(field: Any) -> Any:
    """The value a ``var`` field sets, for ``--help-notebook``: a string literal expression (as
    :func:`_literal` writes it) read back, anything else as it is (an expression stays its text)."""
    if isinstance(field, str) and field.startswith("{") and field.endswith("}"):
        try:
            value = ast.literal_eval(field[1:-1].strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return field
        return value if isinstance(value, str) else field
    return field


class S2OTranslator(Translator):  # type: ignore[misc]  # papermill is untyped
    """Writes papermill's parameters as one ``%%parameters`` cell of a ``var`` fragment (module docstring)."""

    @classmethod
    def codify(cls, parameters: dict[str, Any], comment: str = "Parameters") -> str:
        """The cell: a ``# comment`` line (the kernel skips comment lines) and the fragment.

        Raises ``ValueError`` for a parameter name that is not a string or a value that is not JSON.
        """
        fields = {}
        for name, value in parameters.items():
            if type(name) is not str or not name.isidentifier():
                raise ValueError(f"s2o parameter names are local variable names (Python identifiers), "
                                 f"not {name!r}")
            fields[name] = _literal(value, repr(name))
        text = json.dumps({"var": fields}, indent=2, ensure_ascii=False, allow_nan=False)
        return f"{cls.comment(comment)}\n{MAGIC_LINE}\n{text}\n"

    @classmethod
    def comment(cls, cmt_str: str) -> str:
        """A comment line (SPEC 9: a cell's lines starting with ``#`` are comments)."""
        return f"# {cmt_str}".strip()

    @classmethod
    def inspect(cls, parameters_cell: Any) -> list[Any]:
        """The parameters a ``var`` fragment in the cell sets (name, JSON type, default), for
        ``papermill --help-notebook``; ``[]`` for any other cell."""
        lines = [line for line in str(parameters_cell.source).splitlines()
                 if not line.lstrip().startswith("#") and line.strip() != MAGIC_LINE]
        try:
            data = json.loads("\n".join(lines))
        except ValueError:
            return []
        fields = data.get("var") if isinstance(data, dict) else None
        if not isinstance(fields, dict):
            return []
        return [Parameter(name=name, inferred_type_name=type(_value(value)).__name__,
                          default=json.dumps(_value(value)), help="")
                for name, value in fields.items()]  # fmt: skip


papermill_translators.register(LANGUAGE, S2OTranslator)
