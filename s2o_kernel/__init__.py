"""s2o-kernel: Search2o agent expressions and fragments in Jupyter.

``s2o_kernel.engine`` evaluates expressions, dynamic strings and fragments and
knows nothing about Jupyter; ``s2o_kernel.kernel`` is the Jupyter kernel built
on it. Importing this package imports neither.
"""

__version__ = "0.1.0"
