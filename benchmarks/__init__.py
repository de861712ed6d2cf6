"""``python -m benchmarks``: the project's figures against their floors, measured in one run (issue 12).

Sections are modules of this package (``engine``, ``fragments``, ``kernel``, ``scale``), each with
``measure(quick) -> list[Figure]`` and ``TARGETS``; see :mod:`benchmarks.common`. Not a test suite:
pytest never collects this folder, and no test times anything.
"""
