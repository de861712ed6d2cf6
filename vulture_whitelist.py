"""Names vulture (dead-code finder) cannot see used: framework hooks and data read by name.

Run as ``vulture`` (configured in ``pyproject.toml``); this file is read, never imported. Each line
uses a name that something outside the code vulture reads uses: ipykernel calls the ``do_*``
handlers and reads the kernel's class attributes, pydantic reads ``model_config`` and validators,
settings fields are read from TOML by name, allowlists name the example functions, Python's I/O
machinery calls ``isatty``/``encoding`` on the print stream.
"""
# ruff: noqa

# ipykernel: Kernel class attributes and handlers (s2o_kernel/kernel/kernel.py)
_.implementation, _.implementation_version, _.language, _.language_version, _.language_info
_.banner, _.help_links, _._allow_stdin, _.kernel_info
_.create_subshell_request, _.delete_subshell_request
_.do_execute, _.do_complete, _.do_inspect, _.do_is_complete, _.do_history, _.do_shutdown
cell_meta, cell_id, detail_level, omit_sections  # ipykernel's handler signatures

# pydantic models: configuration and validators
_.model_config, _._known_operators, _._const_is_json
# settings fields read from TOML (SPEC 10) by name
_.db_rows, _.llm_cost, _.userEmail, _.userSession, _.serverIp, _.cookies, _.db, _.llm, _.profiles

# allowlist entries of the teaching configuration (s2o_kernel/examples.py)
fetch_weather, slow_answer, countdown, endless

# the worker's print stream, as Python's I/O machinery reads it
_.encoding, _.isatty
# shlex.shlex settings and tempfile's module-level default, set by attribute
_.whitespace_split, _.commenters, _.tempdir
# exception chaining cleared on purpose (execution.map_error)
_.__cause__, _.__context__
# public data read by tests and tools
_.restarts, _.secret, _.settings_source, _.published, KINDS
# the table of the worker's operations: its documentation, and what only tests read (engine/worker/operations.py)
_.shape, PARENT_ONLY, PING
# the code cache's counts, read by tests and benchmarks/engine.py (s2o_kernel/engine/run/codecache.py, worker/mirror.py)
_.loaded, _.reported, _.touched, _.compacted
# module-level __getattr__ of s2o_kernel.kernel (lazy attributes)
__getattr__
# reprlib.Repr settings and the methods it dispatches to by type name (values._BoundedRepr)
_.maxlevel, _.maxstring, _.maxother, _.maxlong, _.maxlist, _.maxtuple, _.maxset, _.maxfrozenset, _.maxdeque
_.maxdict, _.repr_int, _.repr_instance

# the outside world (issue 9): httpx calls a transport's handler, SQLAlchemy calls its "connect" event
# listener with (dbapi_connection, connection_record), secrets_file is a settings field read from TOML
_.handle_async_request, _query_only, record, _.secrets_file
# papermill calls the translator's codify and loads the engine named by the entry point (s2o_kernel/parameters.py)
_.codify, S2OEngine
# jupyter_client's Session methods and traitlets' dynamic default, overridden (s2o_kernel/kernel/replay.py, kernel.launch)
_._add_digest, _.clone, _._session_default
# the engine's public API for callers on an event loop (Session and IsolatedSession; SPEC 6), used by its
# users and tests, not by the package itself
_.evaluate_async
# the whole policy stated as one table (s2o_kernel/engine/policy/__init__.py): for readers, checked by the layout test
POLICY
