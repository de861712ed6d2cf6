"""Entry point: ``python -m s2o_kernel``.

* ``python -m s2o_kernel install [--user|--sys-prefix|--prefix DIR]
  [--name NAME] [--display-name NAME] [--env VAR VALUE]`` installs the
  kernelspec with this interpreter's absolute path in ``argv``;
* ``-h`` / ``--help`` alone prints :data:`USAGE` (not ipykernel's help, which
  speaks of IPython and of installing the IPython kernel);
* anything else (``-f CONNECTION_FILE`` as Jupyter passes it) starts the
  kernel.
"""

from __future__ import annotations

import sys

USAGE = """\
usage: python -m s2o_kernel install [--user | --sys-prefix | --prefix DIR] [--name NAME]
                                    [--display-name NAME] [--env VAR VALUE]
       python -m s2o_kernel -f CONNECTION_FILE

The s2o kernel: Search2o agent expressions and fragments in Jupyter.

  install   register the kernelspec with this interpreter's path
            (python -m s2o_kernel install --help for its options)
  -f FILE   run the kernel on a connection file, as Jupyter starts it;
            use it through Jupyter: jupyter console --kernel s2o, or JupyterLab
"""


def main(argv: list[str] | None = None) -> int | None:
    """Install the kernelspec (``install ...``; its exit status), print :data:`USAGE` (``-h``/``--help``;
    0; to stderr after an unknown command word: 2), or run the kernel until it shuts down."""
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print(USAGE, end="")
        return 0
    if args and args[0] == "install":
        from s2o_kernel.kernel.install import main as install_main

        return install_main(args[1:])
    if args and not args[0].startswith("-"):  # a word that is no command: never start a kernel for it
        print(f"python -m s2o_kernel: unknown command {args[0]!r}\n\n{USAGE}", end="", file=sys.stderr)
        return 2
    from s2o_kernel.kernel.kernel import launch

    launch(args)
    return None


if __name__ == "__main__":
    sys.exit(main())
