"""The attribute deny-list and the name rules shared by validation and run time (SPEC 3, 3.1).

The underscore rule alone does not contain Python: generators, coroutines,
frames, tracebacks and code objects expose *public* attributes that reach
module globals and from there ``os`` and ``open``. This module holds the fixed,
documented list of such names (each with its reason) and :func:`check_name`,
the one function that applies the name rules. The validator calls it for every
attribute written in an expression; granted helpers such as ``getattr`` call
it for names built at run time, so no string can reach what a literal cannot.

Nothing here trusts the objects it is handed (SPEC 12): a name is checked only
when it is an exact ``str`` (a ``str`` subclass can answer ``startswith`` as it
likes), and :func:`is_metaclass` and :func:`type_name` read a class's flags and
name through ``type``'s own descriptors, never through the object's methods.
"""

from __future__ import annotations

import types

#: Attribute names refused everywhere, with the reason shown to the user.
DENIED_ATTRIBUTES: dict[str, str] = {
    # frames: walk out of the sandbox into host code and its namespaces
    "f_back": "a frame's caller frame leads into host code",
    "f_globals": "a frame's globals are a host module namespace",
    "f_builtins": "a frame's builtins are the real builtins",
    "f_locals": "a frame's locals are host variables",
    "f_code": "a frame's code object exposes host code and constants",
    "f_trace": "installing a trace function runs code outside the rules",
    "f_trace_lines": "frame tracing control",
    "f_trace_opcodes": "frame tracing control",
    "f_lasti": "frame internals",
    "f_lineno": "frame internals",
    "f_generator": "a frame's generator leads back to frames",
    # tracebacks
    "tb_frame": "a traceback's frame leads into host code",
    "tb_next": "walks the traceback chain to host frames",
    "tb_lasti": "traceback internals",
    "tb_lineno": "traceback internals",
    # generators
    "gi_frame": "a generator's frame leads into host code",
    "gi_code": "a generator's code object exposes host code and constants",
    "gi_yieldfrom": "the inner iterator a generator delegates to",
    "gi_running": "generator internals",
    "gi_suspended": "generator internals",
    # coroutines
    "cr_frame": "a coroutine's frame leads into host code",
    "cr_code": "a coroutine's code object exposes host code",
    "cr_await": "the awaitable a coroutine waits on (for example asyncio's own coroutines)",
    "cr_origin": "where a coroutine was created (host file names)",
    "cr_running": "coroutine internals",
    "cr_suspended": "coroutine internals",
    # async generators
    "ag_frame": "an async generator's frame leads into host code",
    "ag_code": "an async generator's code object exposes host code",
    "ag_await": "the awaitable an async generator waits on",
    "ag_running": "async generator internals",
    "ag_suspended": "async generator internals",
    # driving generators and coroutines by hand bypasses the event loop and limits
    "send": "drives a generator or coroutine outside the runtime",
    "throw": "injects an exception into a generator or coroutine",
    "asend": "drives an async generator outside the runtime",
    "athrow": "injects an exception into an async generator",
    "aclose": "drives an async generator outside the runtime",
    # code objects
    "co_code": "a code object's bytecode",
    "co_consts": "literals compiled into host code (passwords, URLs)",
    "co_names": "names used by host code",
    "co_filename": "host source paths",
    # classes and functions
    "mro": "the method resolution order leads to object and every class",
    "cell_contents": "closure variables of host functions",
    "fget": "a property's host getter function",
    "fset": "a property's host setter function",
    "fdel": "a property's host deleter function",
    "func": "the function a partial or method wraps",
    "keywords": "the arguments a partial closes over",
    "register": "mutates a global class or dispatch registry",
    "registry": "a dispatch registry of host functions",
    "dispatch": "returns host implementation functions",
    # exceptions must never become values; these are their leak channels
    "with_traceback": "attaches or reaches a traceback (frames)",
    "tb": "a traceback object",
    # asyncio tasks, futures and loops
    "get_coro": "the running task's coroutine, whose frame leads out",
    "get_stack": "the frames of a task",
    "print_stack": "prints host frames",
    "get_loop": "the event loop: subprocesses, executors, callbacks outside limits",
    "get_context": "a task's context variables",
    "add_done_callback": "runs a callback outside the rules and limits",
    "remove_done_callback": "event loop internals",
    "set_result": "completes host futures",
    "set_exception": "completes host futures",
    "run_in_executor": "runs code outside the event loop and limits",
    "call_soon": "runs a callback outside the rules and limits",
    "call_later": "runs a callback outside the rules and limits",
    "call_at": "runs a callback outside the rules and limits",
    "subprocess_exec": "starts processes",
    "subprocess_shell": "starts processes",
}

#: Prefixes refused wholesale: new attributes of frames, tracebacks,
#: generators, coroutines, async generators and code objects always use them.
DENIED_PREFIXES: tuple[str, ...] = ("f_", "tb_", "gi_", "cr_", "ag_", "co_")

#: Attributes refused by the ``format`` rule (SPEC 3): field traversal from data.
FORMAT_ATTRIBUTES = frozenset({"format", "format_map"})

#: Objects on which no attribute at all may be read at run time.
OPAQUE_TYPES: tuple[type, ...] = (
    types.FrameType,
    types.TracebackType,
    types.CodeType,
    types.GeneratorType,
    types.CoroutineType,
    types.AsyncGeneratorType,
    types.CellType,
)


def name_violation(name: object) -> tuple[str, str] | None:
    """The rule an attribute or keyword name breaks, or ``None`` when it is allowed.

    Returns ``(code, message)`` with code ``underscore``, ``format`` or
    ``attribute`` (SPEC 3 and 3.1). A name that is not an exact ``str`` (a
    subclass, whose ``startswith`` or ``__eq__`` may lie) breaks the
    ``attribute`` rule (SPEC 12: guards never trust the type of what they are
    handed).
    """
    if type(name) is not str:
        return "attribute", f"an attribute name must be a plain str, not {type_name(name)!r}"
    if name.startswith("_"):
        return "underscore", f"names starting with '_' are not allowed: '{name}'"
    if name in FORMAT_ATTRIBUTES:
        return "format", f"the attribute '{name}' is not allowed (format strings can read any attribute)"
    reason = DENIED_ATTRIBUTES.get(name)
    if reason is None and name.startswith(DENIED_PREFIXES):
        reason = "attributes of frames, tracebacks, generators, coroutines and code objects are not allowed"
    if reason is not None:
        return "attribute", f"the attribute '{name}' is not allowed: {reason}"
    return None


#: ``Py_TPFLAGS_TYPE_SUBCLASS``: set on ``type`` and every class derived from it (metaclasses).
_TYPE_SUBCLASS_FLAG = 1 << 31
_type_flags = type.__dict__["__flags__"].__get__
_type_name = type.__dict__["__name__"].__get__


def is_class(obj: object) -> bool:
    """Whether ``obj`` is a class (its type is ``type`` or a metaclass), read from the C type flags."""
    return bool(_type_flags(type(obj)) & _TYPE_SUBCLASS_FLAG)


def is_metaclass(obj: object) -> bool:
    """Whether ``obj`` is ``type`` or a class derived from it (``abc.ABCMeta``, ``enum.EnumType``).

    Calling a metaclass with three arguments builds a class, whose methods
    (``startswith``, ``__eq__``, ``keys`` …) can then lie to any check (SPEC
    12). Decided from the C type flags of ``obj`` and of its type, which
    neither ``__class__`` nor a metaclass's ``mro()`` can fake.
    """
    return is_class(obj) and bool(_type_flags(obj) & _TYPE_SUBCLASS_FLAG)


def type_name(obj: object) -> str:
    """The name of ``obj``'s type for messages, read through ``type`` (a class cannot override it).

    At most 60 characters, as an exact ``str``.
    """
    return str.__str__(_type_name(type(obj)))[:60]
