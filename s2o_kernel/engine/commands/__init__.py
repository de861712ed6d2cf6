"""Fragment commands (SPEC 7): one module per command (or small family), each building a
:class:`~.spec.CommandSpec`; :mod:`.registry` lists them. A command sees the fragment parser and the
interpreter through the protocols of :mod:`.protocols`, never the modules themselves.

The package imports nothing itself, so importing one command (``commands.var``, which the loop fast path
uses) does not import the registry and every other command with it (no import cycle).
"""
