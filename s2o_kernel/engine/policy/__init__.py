"""The policy: everything an expression is refused or bounded by, stated whole in one table (SPEC 3, 4, 6, 12).

:data:`POLICY` is the policy as data, one row a rule, in the order an expression meets them: what is refused
or bounded, when (``compile``: before anything runs; ``run``: as it runs; ``load``: when the settings are
loaded), the module that holds it and the SPEC section it comes from. Each module holds one rule and says
why it is enough; this table is the map. Two rules live outside this folder because they are the run's own:
the time limit (:mod:`..run.limits`, every evaluation armed) and containment by process and by the
operating system (:mod:`..worker`, :mod:`..confine`), which stop what no rule here can (one long C call,
memory, an escape of the rules themselves).
"""

from __future__ import annotations

from typing import NamedTuple


class Rule(NamedTuple):
    """One row of :data:`POLICY`: ``what`` is refused or bounded, at ``stage``, by ``module`` (a module of this
    package), from SPEC section ``spec``."""

    what: str
    stage: str
    module: str
    spec: str


#: The whole policy (see the module docstring); ``tests/engine/test_layout.py`` checks that every module of
#: this package is named here and every name is a module.
POLICY: tuple[Rule, ...] = (
    Rule("names: only allowlist names, locals set earlier and the runtime namespaces; nothing else exists",
         "load", "allowlist", "4"),
    Rule("entries: standard-library modules and classes granted by class, each with its reason; refused ones "
         "(frames, processes, files, code) are refused-entry", "load", "stdlib_audit", "12"),
    Rule("attributes: dunders, underscores and a deny-list of attributes that reach frames, code or modules",
         "compile", "denylist", "3.1"),
    Rule("operators and sizes: **, *, <<, %, range, format widths and the sized methods bounded before the C "
         "work they would start", "run", "bounded", "6, 12"),
    Rule("calls that take names or values at run time (getattr, **kwargs, three or more arguments, import by "
         "C code) are checked: no metaclass call, no hidden attribute", "run", "guards", "3.1, 12"),
    Rule("callables and iterators handed to untrusted code stand in wrapped, their results checked",
         "run", "wrappers", "3.1, 12"),
    Rule("a granted value is checked through whatever holds it (dicts, lists, sets, subclasses, mapping "
         "proxies, iterators): a refused value inside is refused-entry", "load", "granted", "4, 12"),
    Rule("values reached through a granted host object, and granted containers, are checked by class at every "
         "read, call and item", "run", "reach", "12"),
    Rule("calls that may keep a value the expression made in something the session holds are found at "
         "compile time", "compile", "stores", "12"),
    Rule("those calls check the values they would keep first (the store guard at run time)", "run", "kept", "12"),
    Rule("results and variables hold nothing forbidden at any depth (generators, frames, modules, host "
         "functions); the parts of a value are read by exact type", "run", "values", "6, 12"),
    Rule("what the values check opens: lazy iterators and the callers that consume them", "run", "iterators", "12"),
    Rule("what a value holds, read by exact type (no Python code of the value runs)", "run", "parts", "6, 12"),
    Rule("a value is measured before anything writes it out (repr, JSON): past the cap it is not-json",
         "run", "written", "9, 12"),
)
