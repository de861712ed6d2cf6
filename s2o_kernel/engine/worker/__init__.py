"""Containment by process (SPEC 6, 12): a session run in a supervised child process.

* :mod:`.wire`: the wire format, the one place that knows the JSON shapes of
  requests, replies, events, values and errors;
* :mod:`.client`: :class:`IsolatedSession`, which spawns, supervises, kills and
  restarts the worker;
* :mod:`.operations`: the table of operations, each one's name, argument
  schema and result codec, which both sides read;
* :mod:`.server`: the :class:`~.server.Worker` in the child, which dispatches
  through that table; ``python -m s2o_kernel.engine.worker`` starts it.
"""

from .client import IsolatedSession

__all__ = ["IsolatedSession"]
