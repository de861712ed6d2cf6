"""Every numeric bound of the package, each once, with its reason, its unit and its SPEC section.

SPEC is the specification the project implements; its sections on limits are 6 (running, awaiting and
limits), 9 (the kernel) and 12 (containment). Every other module imports its bounds from here, under the
same names, and defines none itself (``tests/engine/test_layout.py`` checks it). This module imports
nothing, so any module may; it sits at the top of the package, beside :mod:`.engine` and :mod:`.kernel`,
because importing a module of :mod:`.engine` imports the whole engine, which the kernel's start path
(``kernel/kernel.py``, ``kernel/history.py``) must not do before its first ``kernel_info_reply``.

**What counts as a bound**: a number that limits how much, how many, how deep, how long or how often:
a size, a count, a depth, a length, a duration, an interval between two looks, a threshold under which
work goes unchecked, and the defaults of the ``limits`` and ``rules`` settings a user may change (their
values in ``default.toml`` must match). A bound derived from another is written from it.

**What does not**, and stays where it is used: a constant of a protocol or system the package talks to
(the bit flags of CPython's type objects, ``prctl``, ``ioctl`` and syscall numbers, seccomp, BPF and Landlock
values in :mod:`.engine.confine`, SQLite result codes, exit codes, ANSI codes), a sentinel
(``engine.stores.RECEIVER``), the drawing metrics of the data-flow SVG (pixels of a layout,
:mod:`.engine.fragments.dataflow_svg`), and the parameter of a heuristic (``engine.spelling.CUTOFF``,
a similarity ratio). Nor is an agent definition's ``bounds`` (SPEC 7.1), which a fragment sets:
:mod:`.engine.fragments.definition_bounds`.

Units: bytes (``<< 20`` is MiB), characters, items, levels, seconds unless a name says otherwise.
"""

# -- limits a user sets: the defaults of ``limits.*`` and ``rules.*`` (SPEC 6, 10, 12) ----------------

#: Default ``limits.time``: seconds a run may take (SPEC 6: 30); past it, ``timedOut``.
DEFAULT_TIME = 30.0
#: Default ``limits.loop_iterations``: passes of one ``for``/``while`` command (SPEC 6: 10,000); ``loop-limit``.
DEFAULT_LOOP_ITERATIONS = 10_000
#: Default ``limits.db_rows``: rows one ``db`` command returns (SPEC 6: 10,000); ``row-limit``.
DEFAULT_DB_ROWS = 10_000
#: Default ``limits.llm_cost``: US dollars of LLM spend per run (SPEC 6: 0.50); ``cost-limit``.
DEFAULT_LLM_COST = 0.50
#: Default ``limits.definition_length``: characters of a definition or expression (SPEC 6: 20,480); ``too-long``.
DEFAULT_DEFINITION_LENGTH = 20_480
#: Default ``limits.memory``: bytes an evaluation may hold (SPEC 6, 12: 1 GiB); ``memory-limit``.
DEFAULT_MEMORY = 1 << 30
#: Smallest ``limits.memory`` accepted, in bytes (1 MiB).
MIN_MEMORY = 1 << 20
#: Default ``limits.output_part_bytes``: bytes of one output part (SPEC 12: 1 MiB); ``output-limit``.
DEFAULT_OUTPUT_PART_BYTES = 1 << 20
#: Default ``limits.output_parts``: output parts per run (SPEC 12: 1,000); ``output-limit``.
DEFAULT_OUTPUT_PARTS = 1_000
#: Default ``limits.output_bytes``: bytes of output per run, parts and printed text (SPEC 12: 16 MiB).
DEFAULT_OUTPUT_BYTES = 16 << 20
#: Default ``rules.max_comprehension_depth``: comprehensions nested in one expression (SPEC 3, 10).
DEFAULT_COMPREHENSION_DEPTH = 4
#: Default ``rules.max_for_clauses``: ``for`` clauses in one comprehension (SPEC 3, 10).
DEFAULT_FOR_CLAUSES = 3
#: Largest ``limits.output_part_bytes`` accepted, in bytes: a part this size, written as JSON (at most six
#: bytes a byte, ``\u0000``), still fits one message of the worker's pipe (:data:`MAX_MESSAGE`, SPEC 12).
MAX_OUTPUT_PART = 8 << 20
#: Largest settings file read, in bytes (a file named by ``%config`` may be any file; SPEC 10).
MAX_SETTINGS_FILE = 16 << 20

# -- expressions: validation and bounded arithmetic (SPEC 3, 3.1, 6, 12) ------------------------------

#: Deepest AST nesting the validator accepts, in levels (code ``too-deep``, SPEC 12).
MAX_AST_DEPTH = 200
#: Largest integer result of a bounded operator, in bits (about 301,000 decimal digits; SPEC 6).
MAX_INT_BITS = 1_000_000
#: Largest sequence built by repetition, in items (characters for ``str``; SPEC 6).
MAX_ITEMS = 10_000_000
#: Most steps of a bounded ``range`` (SPEC 6).
MAX_RANGE = 10_000_000
#: Largest width or precision in a format specification or a ``%``-format, in characters (SPEC 3.1).
MAX_FORMAT_WIDTH = 100_000
#: Numbers strictly inside ±this multiply with no bound check (a product of at most 124 bits, far below
#: :data:`MAX_INT_BITS`): the rewritten ``*`` and the bounded operators' fast path.
SMALL_NUMBER = 1 << 62
#: A name's ``int`` multiplies natively strictly inside ±this: a one-digit ("compact") int of CPython, compared
#: by a specialized instruction (a product of at most 60 bits).
COMPACT_INT = (1 << 30) - 1

# -- values: the checks and the text of a value (SPEC 5, 6, 9, 12) ------------------------------------

#: The most items a value may have written out (its ``repr``, its JSON) for the engine and the kernel to
#: write it: past it a display is a placeholder and the value is not JSON (SPEC 9, 12).
WRITTEN_LIMIT = 2_000_000
#: Most characters of text a message shows for one value (SPEC 6).
MAX_TEXT = 2_000
#: Bits of the largest ``int`` a message shows in full (about :data:`MAX_TEXT` decimal digits).
INT_TEXT_BITS = int(MAX_TEXT * 3.32)
#: Most items one values check visits before it refuses the value as too large to check (SPEC 6, 12): the
#: result and locals check, and the check of what a granted or reached value holds (``policy/granted.py``).
SCAN_LIMIT = 10_000_000
#: An integer of more bits is not JSON: past CPython's conversion to text (4,300 digits), ``json.dumps``
#: raises for it (SPEC 5).
JSON_INT_BITS = 14_000
#: ``2 ** JSON_INT_BITS``: integers from it on (either sign) are not JSON in a fragment (code ``fragment``).
JSON_INT_LIMIT = 1 << JSON_INT_BITS
#: Deepest nesting of lists and objects in a JSON value the engine accepts, in levels: agent and
#: conversation values and fragments (code ``too-deep``, SPEC 12). The same bound as the expression
#: validator's, so copying, comparing and showing such values never exhausts the stack.
MAX_JSON_DEPTH = MAX_AST_DEPTH
#: Longest key written whole in the place of a JSON item in a message, in characters; a longer one is cut.
PLACE_KEY = 60
#: Longest text of a refused or faulty value (a ``mime``, a name, a worker's message) quoted in an error
#: message, in characters.
QUOTE = 80
#: Longest literal text completion reads to list its members (``"a,b".split``), in characters (SPEC 9).
LITERAL_LENGTH = 1_000
#: Most frames of the host's own code an error shows (the innermost ones), when an allowlisted function
#: raises: enough for a helper calling helpers, short enough to read in a cell (SPEC 9).
MAX_USER_FRAMES = 10
#: Most calls an error's call chain names (the outermost and innermost halves past it), a bound on what an
#: error carries whatever ``MAX_NESTING`` allows (SPEC 9).
MAX_CALL_CHAIN = 20

# -- fragments (SPEC 7, 8, 12) -------------------------------------------------------------------------

#: Most levels of command lists inside commands, counting the levels added by calls (``too-deep``, SPEC 12).
MAX_NESTING = 50
#: How deeply parentheses may nest in a reference expression, in levels (SPEC 8).
MAX_REFERENCE_DEPTH = 32
#: At most this many near misses are named in the hint for a misspelled fragment or magic name (SPEC 9, 9.1).
MAX_NEAR_MISSES = 5
#: JSON of more objects, or of more keys in all, than this is data, never looked at as a misspelled fragment.
MAX_LOOKED_AT = 50
#: A loop hands the event loop to ``parallel`` branches (and a pending cancellation) at most every this many
#: passes, so that a pass costs no event-loop turn (about 5 µs; ``docs/performance.md``), ...
YIELD_EVERY = 32
#: ... and at most every this many seconds. A turn of the event loop releases the interpreter lock for
#: its ``select`` and takes it back at once; a thread waiting for the lock (the session's caller, a
#: ``Session.interrupt`` from a timer, the worker's reporter and its SIGINT handler, the kernel's own
#: threads in-process) asks for it only after waiting CPython's switch interval (5 ms) with no other
#: thread taking it, so a loop that turned the event loop every few microseconds starved every other
#: thread of the process for seconds (a 10 ms ticker ran once in 3 s; an interrupt from a timer was
#: lost in 6–17 runs out of 40–60, the run going on to its time limit; docs/design.md). Turns at least
#: this far apart leave the switch interval room to hand the lock over. A pass that never yields is
#: still stopped by the run's watchdog.
YIELD_INTERVAL = 0.01
#: Most model turns one ``llm`` command makes (each answer that asks for tools costs one more; SPEC 7.1).
MAX_LLM_TURNS = 10
#: How many times ``ask`` asks one question before ``ask-answer`` (SPEC 7.1).
ASK_TRIES = 3

# -- the outside world (SPEC 7.1, 12) ------------------------------------------------------------------

#: Default ``timeout`` of an api profile, in seconds (SPEC 7.1).
DEFAULT_API_TIMEOUT = 30
#: Default ``max_response_bytes`` of an api profile (bytes of one response body) and of an llm profile (bytes of
#: one reply's text and tool-call arguments together); SPEC 7.1: 10 MiB.
DEFAULT_MAX_RESPONSE = 10 << 20
#: What one call may hold decoded, as a multiple of the bytes it may read (its ``max_response_bytes``): the
#: text decoded from the bytes read and the JSON parsed from that text, together (SPEC 7.1, 12). With the bytes
#: read themselves, the kernel's process holds at most about 3× what a call may read, under SPEC 12's 4×.
DECODED_FACTOR = 2
#: Bytes of memory one JSON item may take while it is parsed, as a JSON text is charged before it is parsed:
#: each list, object, key and value counts (a value's characters are charged apart). The most per item of the
#: shapes measured: an object of many distinct keys, about 75 bytes an item at its peak (the object's table
#: doubles as it grows); an object of one key, 64 (192 bytes for three items); an empty list, 32 (56 bytes,
#: and 8 for its place in its parent, for two items).
JSON_ITEM_MEMORY = 80
#: Bytes of a text decoded at once when the memory its characters take is measured before it is decoded
#: whole (UTF-8 that holds characters outside the Basic Multilingual Plane, which take 4 bytes each).
DECODE_STEP = 1 << 20
#: Most tool calls one model turn may ask for (``llm-too-large`` past it; SPEC 7.1).
MAX_TOOL_CALLS = 128
#: Pieces of a streamed reply's text kept apart before they are joined into one (each piece costs its own
#: object, about 50 bytes, however short it is).
JOIN_EVERY = 4096
#: How many rounds of percent-decoding a server may apply to a path (``%252e`` → ``%2e`` → ``.``): an api
#: command's path is checked through that many (SPEC 7.1, 12).
DECODING_ROUNDS = 3
#: Most JSON values in the fields of one outside call a contained run makes (SPEC 7.1, 12): the kernel's process
#: walks a call's fields several times before and after its handler runs (secrets put back, the result masked,
#: JSON written and read again), at up to ~60 µs a value on a loaded machine, so a call it is asked for costs
#: it at most about a second. The worker refuses a larger call itself (``worker-protocol``); its parent, which
#: does not trust it, checks again before any work.
MAX_CALL_ITEMS = 16_384
#: Longest JSON path of an outside call's command (``commands[2].api``), in characters: it is written into
#: every error of the call. Far more than a definition of any sensible length makes.
MAX_CALL_PATH = 65_536
#: Seconds :meth:`.engine.outside.gateway.Gateway.close` waits for the pools to close.
CLOSE_GRACE = 5.0
#: Seconds a cancelled outside call waits for the call to end.
CALL_UNWIND = 2.0
#: Bytes of a cassette file read at most (SPEC 13): a recording of a notebook's calls, each response within its
#: profile's own cap; a larger file is refused (``cassette``) rather than held whole in the kernel's memory.
CASSETTE_BYTES = 64 * 1024 * 1024
#: Fewest base64 characters that stand for a secret alone before a cassette's secret scan looks for them (SPEC
#: 13): fewer would match ordinary text by chance, so a secret that short is scanned for plain only.
MIN_BASE64_CORE = 6
#: Most differing fields a ``replay-miss`` names for the closest entry (SPEC 13): enough to see what changed.
REPLAY_DIFFERENCES = 5

# -- the run trace (SPEC 14) ---------------------------------------------------------------------------

#: Passes of one loop whose spans a trace keeps (SPEC 14): the rest are counted on the loop's span, their outside
#: calls' tokens and price added to it, so a 10,000-pass loop costs its run no more than its first passes do.
TRACE_PASSES = 20
#: Spans one run's trace keeps (SPEC 14); the ones past it are counted on the run's span (``dropped``).
TRACE_SPANS = 2_000
#: Characters of one value's summary in a trace (SPEC 14: "long values cut"), the cut marked with an ellipsis.
TRACE_VALUE_CHARS = 160
#: Fields and variables one span lists (SPEC 14): a ``var`` of 500 fields shows its first ones and a count.
TRACE_ITEMS = 40
#: Characters of all the text of one run's trace together (SPEC 14): summaries, names, paths, keys, messages.
#: Past it a summary is only its ellipsis and no span is kept. Written as JSON with escapes (six bytes a
#: character at worst) it stays within 6 MiB, well inside a worker's reply (16 MiB at least).
TRACE_CHARS = 1 << 20
# -- batch runs (SPEC 15) -------------------------------------------------------------------------------

#: Times Dask runs a case's task again when it raised (a Dask worker that dies is rescheduled by Dask anyway).
BATCH_RETRIES = 2
#: Cases under way at once per worker of a batch run (the next starts as one ends): enough to keep every
#: worker busy, few enough that the runner's memory does not grow with the cases.
BATCH_IN_FLIGHT = 2
#: The same per Dask worker: a case's round trip through the scheduler takes milliseconds, so more wait
#: queued there for a worker to take them the moment it is free.
BATCH_DASK_IN_FLIGHT = 32

#: Ints a trace writes whole at once are within ± this (SPEC 14); a larger one is written in bounded time instead.
TRACE_SHORT_INT = 10**15
#: Levels of containers a value's summary in a trace opens (SPEC 14); deeper ones show as ``[…]``.
TRACE_DEPTH_SHOWN = 4
#: The largest count a trace sums (SPEC 14): a reader (the parent of a worker) takes counts below 2**53.
TRACE_MOST_COUNT = 2**53 - 1
#: The largest price, in US dollars, a trace sums (SPEC 14): a reader takes finite prices only.
TRACE_MOST_PRICE = 1e300
#: Characters of lines ``%trace`` shows (SPEC 14): the spans past them are counted on a last line. The html of
#: that many characters is at most about 2 MB after escapes, and sanitised in about a tenth of a second.
TRACE_SHOWN_CHARS = 256 * 1024
#: Characters of a span's name, path or error message (SPEC 14): a JSON path 100 levels deep fits; longer is cut.
TRACE_TEXT_CHARS = 8_192
#: Seconds a thread waiting for an outside call on the gateway's loop waits past the call's own timeout, and
#: then again for the cancelled call to end, before it stops waiting and gives the loop thread up: a step that
#: holds the loop keeps no caller past the run's time limit plus SPEC 12's 2 s.
CALL_GRACE = 0.5

# -- time: the watchdog, the loop thread, unwinding (SPEC 6, 12) ---------------------------------------

#: How often the watchdog checks deadlines, in seconds: pure-Python work stops at most this late.
TICK = 0.02
#: Seconds between two sendings of a fired exception that the thread has not taken yet (``limits.Armed``).
REFIRE = 0.1
#: Seconds a caller waits for an interrupted or timed-out run's task to end (its ``finally`` blocks, the
#: state its commands restore, ``loop.end_leftovers``' own 1 s grace) before it reports the run's end.
UNWIND_WAIT = 3.0
#: Seconds between a waiting caller's looks at whether a cancelled run has outlived :data:`UNWIND_WAIT`.
UNWIND_POLL = 0.25
#: Seconds an interrupted run on the loop thread has to reach an ``await`` (where its cancellation lands)
#: before the watchdog interrupts the expression it is in (``Watchdog.interrupt_soon``).
INTERRUPT_GRACE = 0.05

# -- the evaluation worker and its pipe (SPEC 12) ------------------------------------------------------

#: Longest message on the worker's pipe, in bytes, without its ending newline: a request of the parent (a
#: fragment, a saved state), and the ceiling of an ``output`` event (a part of :data:`MAX_OUTPUT_PART` bytes
#: written as JSON fits it).
MAX_MESSAGE = 64 << 20
#: Longest message the kernel's process reads from its worker other than an ``output`` event, in bytes: replies
#: and every other event (SPEC 7.1, 12). The worker is not trusted (its language rules may have failed), so the
#: parent reads and decodes no more than this per message: JSON amplifies, so a reply of one long line of
#: ``[[],…]`` would take about 26 times its bytes once decoded.
#: An honest worker's messages fit: a value's text is at most :data:`MAX_REPR` characters and printed text goes in
#: chunks of :data:`PRINT_CHUNK` characters, at most 12 bytes each as JSON (an astral character's escapes).
MAX_CONTROL_MESSAGE = 16 << 20
#: Most JSON values one message of the worker may hold (strings, numbers, lists and objects; an object's keys
#: do not count): decoded, a value costs the parent up to ~200 bytes (a one-key object in a list) for as few as
#: 2 bytes of text, so a message at this many comes to ~1.6 times :data:`MAX_CONTROL_MESSAGE` of objects, and
#: with its text within 4 times the bytes the parent let in (SPEC 7.1: at most 4x). Past it: ``worker-protocol``.
MAX_MESSAGE_ITEMS = MAX_CONTROL_MESSAGE // 128
#: Deepest nesting of lists and objects in a message of the worker, in levels: a JSON value at the engine's
#: bound (:data:`MAX_JSON_DEPTH`) inside the message's own levels (a reply, its result, the state, a scope,
#: a value's display; 8 leaves room). Past it: ``too-deep`` (SPEC 12).
MAX_MESSAGE_DEPTH = MAX_JSON_DEPTH + 8
#: Bytes one byte of an output part's text may take written as JSON (``\u0000``, six for one): an ``output``
#: event's line is at most this many times ``limits.output_part_bytes``, plus :data:`MESSAGE_SLACK`.
JSON_ESCAPE = 6
#: Bytes of an ``output`` event besides its part's content: the envelope, the part's type and mime, its keys.
MESSAGE_SLACK = 64 << 10
#: Characters :mod:`.engine.run.bounded_json` reads in its slow path between two counts of what is left of the
#: text (three ``str.count`` passes over what was read since the last; once the rest fits the budgets it is read
#: at C speed): looked at this often, the counts cost no more than the reading, and a long string full of commas
#: (a printed table, a repr) is followed by C-speed reading after at most this many more characters.
JSON_CHECK_SPAN = 4096
#: Bytes asked of the pipe per read.
READ_CHUNK = 1 << 20
#: Longest wait in one ``select`` call on the pipe, in seconds (so a deadline is checked at least this often).
SELECT_POLL = 0.5
#: Longest ``repr`` of a value sent back by the worker, in characters.
MAX_REPR = 1_000_000
#: Deepest nesting of error groups accepted from the worker, in levels.
MAX_ERROR_DEPTH = 8
#: Most characters of printed text in one ``print`` event (at most 6 bytes each once escaped).
PRINT_CHUNK = 1 << 20
#: Bytes of one ``db`` call's rows (UTF-8 text, 4/3 of a blob as base64 text), and the longest text or blob
#: a SQLite connection builds: past it ``db-too-large``. Half the worker's message cap, which a larger result
#: could not cross anyway.
MAX_RESULT_BYTES = MAX_MESSAGE // 2
#: Address space allowed beyond ``limits.memory`` for the worker's own bookkeeping, in bytes (its threads
#: and their stacks exist before the size is measured).
MEMORY_MARGIN = 64 << 20
#: Seconds past ``limits.time`` before a silent worker is killed.
KILL_GRACE = 1.0
#: Seconds an interrupted worker has to answer before it is killed and restarted.
WORKER_INTERRUPT_GRACE = 1.0
#: Seconds past ``limits.time`` + :data:`KILL_GRACE` that an interrupted run which said ``stopping`` may still
#: unwind (and that an interrupted worker may take to answer) before it is killed: the kill and the restart take
#: the rest of :data:`TIME_GRACE`, so the call ends within the limit + 2 s (SPEC 12) whatever the worker says.
STOPPING_GRACE = 0.5
#: Seconds a new worker has to start and load the settings.
WORKER_START_TIMEOUT = 30.0
#: Seconds between two looks at a forked worker that is asked to end.
FORK_POLL = 0.01
#: Seconds a run goes on before the worker reports its progress (SPEC 9: a run past 2 s shows it), ...
PROGRESS_AFTER = 2.0
#: ... and seconds between two reports.
PROGRESS_EVERY = 0.5
#: Most stale scratch folders one sweep removes (each start pays at most this much cleaning).
SWEEP_MOST = 200

# -- the code cache on disk (issue 12) -------------------------------------------------------------------

#: A cache file is not read past, nor written over, this many bytes: a write that would pass it compacts the
#: file first (least recently used records out, down to :data:`CACHE_KEEP` of it).
MAX_CACHE_FILE = 8 << 20
#: Records a cache file holds at most (a reader's start costs per record: ~20 µs each to check and load),
#: likewise compacted past it: half the in-memory compile cache (:data:`CACHE_SIZE`), so that a whole file
#: loaded leaves the process room to compile.
MAX_CACHE_RECORDS = 2048
#: The share of each cap (:data:`MAX_CACHE_FILE`, :data:`MAX_CACHE_RECORDS`) a compaction keeps, the most
#: recently used records: the rewrite's cost (the kept bytes) is paid once per (1 - share) of a cap appended.
CACHE_KEEP = 0.5
#: Sources longer than this, in characters, are not written, nor reported by a worker.
MAX_CACHED_SOURCE = 4_000
#: A record's payload over this many bytes is not written.
MAX_CACHE_RECORD = 64 << 10
#: Sources a worker may report in one event; more are dropped.
MAX_REPORTED = 256
#: Seconds of its own time the parent spends compiling what one request of its worker reported (the rest
#: is dropped: compiled cold again by the next kernel, and reported again).
MIRROR_BUDGET = 0.02

# -- caches in memory: entries kept before the oldest go (or all are cleared) ---------------------------

#: Entries of a compile cache (one per compile fingerprint) before it is cleared.
CACHE_SIZE = 4096
#: Compile fingerprints whose caches the process keeps; the oldest is dropped past this many.
SHARED_FINGERPRINTS = 16
#: Dynamic strings whose expression (or none) is remembered.
EXPRESSION_CACHE = 4096
#: Reference expressions whose parse is remembered.
REFERENCE_CACHE = 256
#: Expressions whose reads (their data flow) are remembered.
READS_CACHE = 4096
#: Keys whose near miss (or none) is remembered.
NEAR_MISS_CACHE = 1024
#: ``var`` targets whose parse is remembered.
TARGET_CACHE = 4096

# -- the kernel (SPEC 9, 9.1) ---------------------------------------------------------------------------

#: Seconds the session start waits for the kernel to answer its first ``kernel_info_request``.
SESSION_START_DELAY = 1.0
#: Largest file a magic reads, in bytes: the largest message the evaluation worker takes, which a fragment
#: or a saved state has to fit in anyway.
MAX_MAGIC_FILE = MAX_MESSAGE
#: Keys that appear twice in one object that a cell's JSON error names, at most.
MAX_DUPLICATES = 5
#: At most this many file names are offered by completion.
MAX_COMPLETED_FILES = 200
#: Line width of the pretty-printed text of a result, in characters (IPython's default).
PRETTY_WIDTH = 79
#: Longer ``repr`` texts, in characters, are shown as they are: parsing them costs time and memory in the
#: kernel (about 65 MB and 0.1 s per 200,000 characters of small items).
PRETTY_MAX_CHARS = 200_000
#: Rows an html table of a result shows; the rest are counted in a last line (``… 4900 more rows``): a
#: 10,000-row ``db`` result as one table is megabytes of html that a browser lays out slowly and nobody reads,
#: and the whole rows stay in ``result`` (and in ``application/json`` under ``%display json``; SPEC 9).
ROW_CAP = 100
#: Items of one list, tuple, set, frozenset or dict a result's text shows, at any depth, before ``...`` stands
#: for the rest: IPython's pretty printer's ``max_seq_length`` (1,000), so a long result reads as it does in
#: IPython, and its message stays small (``list(range(200000))`` was one 1.3 MB line; SPEC 9).
SHOWN_ITEMS = 1_000
#: Seconds one run of ``%timeit`` takes at least when it chooses how many loops a run makes (the first of 1, 10,
#: 100, … loops that takes this long): IPython's rule, long enough for the clock's resolution not to matter.
TIMEIT_RUN = 0.2
#: Runs ``%timeit`` makes without ``-r``: IPython's default; the mean and standard deviation are over them.
TIMEIT_RUNS = 7
#: Most loops ``%timeit`` makes a run when it chooses (10**9, IPython's largest); ``limits.time`` ends it sooner.
TIMEIT_MOST_LOOPS = 10**9
#: The longest value text ``%vars`` shows, in characters; a longer one is cut and ends with ``…``.
VALUE_WIDTH = 100
#: How many message fingerprints wait in a plain set before they are merged into the sorted array.
REPLAY_BATCH = 4096
#: How long a history connection waits for another kernel's lock on the file, in milliseconds.
HISTORY_BUSY_TIMEOUT_MS = 5000
#: How long a history reader waits for the history thread, in seconds.
HISTORY_READ_TIMEOUT = 5.0
#: How long a scheduled history write waits for more cells before it writes, in seconds (a read or close
#: cuts it short).
HISTORY_FLUSH_DELAY = 0.5
#: Most results the history keeps in memory for ``output=True``.
HISTORY_OUTPUTS_KEPT = 1_000
#: Most history entries one read returns (a ``tail`` without ``n``, a ``range`` without ``stop``).
HISTORY_MAX_ENTRIES = 10_000
#: SQLite's page cache for the history connection, in KiB (SQLite's default is 2,000 KiB). The hot path only
#: appends, which touches a few pages at the end of the two B-trees; reads that go past the cache are
#: served by the operating system's file cache. Without this bound the cache fills to ~2 MiB of the
#: kernel's memory over ~60,000 cells (docs/performance.md, "Memory after 100,000 cells").
HISTORY_CACHE_KIB = 256
#: Most cells of this kernel the history keeps when it is in memory only (``:memory:``, or the fall-back
#: when the file cannot be used): the oldest are dropped, so memory does not grow with every cell.
HISTORY_MEMORY_CELLS = HISTORY_MAX_ENTRIES

# -- conformance (SPEC 11, 12) ---------------------------------------------------------------------------

#: A run ends within the time limit plus this many seconds (SPEC 12).
TIME_GRACE = 2.0
#: Characters of a secret or host text that count as showing it (a slice beats whole-value redaction).
LEAK_PARTIAL = 8
