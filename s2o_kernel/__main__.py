"""Entry point: ``python -m s2o_kernel``.

* ``python -m s2o_kernel install [--user|--sys-prefix|--prefix DIR]
  [--name NAME] [--display-name NAME] [--env VAR VALUE]`` installs the
  kernelspec with this interpreter's absolute path in ``argv``;
* anything else (``-f CONNECTION_FILE`` as Jupyter passes it) starts the
  kernel.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int | None:
    """Install the kernelspec (``install ...``; its exit status) or run the kernel until it shuts down."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "install":
        from s2o_kernel.kernel.install import main as install_main

        return install_main(args[1:])
    from s2o_kernel.kernel.kernel import launch

    launch(args)
    return None


if __name__ == "__main__":
    sys.exit(main())
