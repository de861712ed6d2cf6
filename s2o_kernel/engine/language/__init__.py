"""The language: what an expression or a dynamic string is, and the rules it must pass (SPEC 1, 3, 8).

Text in, a checked and rewritten tree out, compiled into one code form:

* :mod:`.parsing` — raw-text checks (``too-long``, ``non-ascii``) and the parse, every failure coded;
* :mod:`.rules` — the compile rules, one ``rule_*`` method per node kind, unknown nodes refused;
* :mod:`.rewrites` — the rewrites the rules record (bounded operators, f-strings, guards), applied in one pass;
* :mod:`.compiled` — :class:`~.compiled.Compiled`, the function form every evaluation runs;
* :mod:`.dynamic` — when a JSON string is an expression (SPEC 1);
* :mod:`.references` — reference expressions and their strict grammar (SPEC 8).

Nothing here runs an expression: that is :mod:`..run`'s. What the rules refuse and what the rewrites
bound is stated whole in :mod:`..policy`.
"""
