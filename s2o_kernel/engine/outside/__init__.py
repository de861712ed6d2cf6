"""The outside world (SPEC 7.1): profiles, and the one door through which a run calls out.

A run never reaches a host, a key or a connection string itself. A command that needs the outside
world (``api``, ``db``, ``llm``, ``ask``; one module each in :mod:`..commands`) evaluates its own fields
in the run, builds an :class:`~.call.OutsideCall` naming a profile, and hands it to the session's
:class:`~.call.Outside`. Two implementations:

* :class:`~.gateway.Gateway`, in the process that holds the settings and the secrets (the kernel's
  own process, or a library user's process with an in-process ``Session``): it evaluates the
  profile's dynamic fields with the secrets, makes the call through the handler for the call's kind
  (:data:`~.gateway.HANDLERS`), and masks every secret value in what comes back;
* in the containment worker, a forwarder that sends the call to the parent process as an
  ``outside`` event and waits for its answer (:mod:`..worker`), so the worker holds no credential
  and makes no outside call.

This package imports nothing from Jupyter.
"""

from __future__ import annotations

from .call import AnswerFn, Outside, OutsideCall, Question

__all__ = ["AnswerFn", "Outside", "OutsideCall", "Question"]
