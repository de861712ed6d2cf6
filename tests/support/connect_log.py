"""An audit hook that logs every ``socket.connect`` of the Python processes that load it: ``SITECUSTOMIZE`` is
a ``sitecustomize.py`` for a folder put first on ``PYTHONPATH``; each connect's address is appended to the
file that ``S2O_TEST_CONNECT_LOG`` names (a test that no process of a replayed run reaches a server)."""

SITECUSTOMIZE = '''
import os, sys
_log = os.environ.get("S2O_TEST_CONNECT_LOG")
if _log:
    def _hook(event, args):
        if event == "socket.connect":
            with open(_log, "a") as f:
                f.write(repr(args[1]) + "\\n")
    sys.addaudithook(_hook)
'''
