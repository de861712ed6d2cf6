"""The Jupyter kernel for s2o (SPEC 9): it adapts the engine to the Jupyter protocol.

Modules, one idea each: ``kernel`` (the ipykernel ``Kernel`` subclass: protocol
handlers only), ``contract`` (the protocols the kernel needs of the engine's
sessions), ``startup`` (settings and session creation), ``runner`` (runs one
cell against a session), ``cells`` (comment stripping and cell classification),
``magics`` (one magic a module, and their registry), ``render`` (result bundles
and error tracebacks), ``completion`` (complete / inspect / is_complete),
``history`` (history requests) and ``install`` (kernelspec installer). Only
``kernel`` imports Jupyter; ``S2OKernel`` is loaded lazily so that importing
the pure modules stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["S2OKernel"]


def __getattr__(name: str) -> Any:
    """``S2OKernel``, imported on first use (it imports ipykernel)."""
    if name == "S2OKernel":
        from s2o_kernel.kernel.kernel import S2OKernel

        return S2OKernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
