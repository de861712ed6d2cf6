"""The run: settings made ready, expressions evaluated under the limits, sessions and their state (SPEC 2, 5, 6).

* :mod:`.engine` — :class:`~.engine.Engine`: an allowlist loaded, the rules configured, a compile cache;
* :mod:`.codecache` — compiled expressions kept on disk across processes, signed;
* :mod:`.execution` — :class:`~.execution.Execution`: the one evaluation path, always armed;
* :mod:`.limits` — the watchdog that raises in the evaluating thread at the deadline;
* :mod:`.loop` — the session's event-loop thread; :mod:`.progress` — a run's loop counts;
* :mod:`.failures` — exceptions and limits mapped to coded errors with positions;
* :mod:`.scopes` — ``agent``, ``conv``, ``const``, ``sys``, ``command``, ``exc``;
* :mod:`.session` — :class:`~.session.Session`: variables, settings changes, the public API;
* :mod:`.undo` — items a failed command wrote, put back;
* :mod:`.introspection` — completion and descriptions of names, for tools.

Fragments (:mod:`..fragments`, :mod:`..commands`) run on a session's loop; containment by process is
:mod:`..worker`'s, by the operating system :mod:`..confine`'s.
"""
