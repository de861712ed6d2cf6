"""Batch runs of an agent over many recorded cases (SPEC 15): ``python -m s2o_kernel.batch AGENT CASES``.

:mod:`.cases` reads the cases, :mod:`.judge` holds a run against its case's expectations, :mod:`.results`
keeps the results file (streamed, resumable) and writes the summary and JUnit XML, :mod:`.runner` runs the
cases in contained workers, and :mod:`.__main__` is the command line. The batch runner uses the engine only
through its public API (``s2o_kernel.engine``), as the kernel does.
"""
