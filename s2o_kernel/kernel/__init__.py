"""The Jupyter kernel for s2o (SPEC 9).

Modules: ``kernel`` (the ipykernel ``Kernel`` subclass), ``runner`` (runs one
cell against an engine session), ``cells`` (comment stripping and cell
classification), ``magics``, ``render`` (result bundles and error
tracebacks), ``completion`` (complete / inspect / is_complete),
``startup`` (settings and session creation) and ``install`` (kernelspec
installer). Only ``kernel`` imports Jupyter; ``S2OKernel`` is loaded lazily
so that importing the pure modules stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["S2OKernel"]


def __getattr__(name: str) -> Any:
    if name == "S2OKernel":
        from s2o_kernel.kernel.kernel import S2OKernel

        return S2OKernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
