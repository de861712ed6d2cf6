"""The kernel's side of outside calls, measured in a process of its own (issue 30): run as a script, it reads
``{"settings": SETTINGS, "calls": [CALL, ...]}`` as JSON on stdin, makes each call through a
:class:`~s2o_kernel.engine.outside.gateway.Gateway` with ``call_sync`` (as the kernel does for its worker) and
prints one JSON line per call::

    {"code": "success" | CODE | "raised TYPE", "seconds": FLOAT, "growth": BYTES, "value": SHORT, "path",
     "json_path"}

A CALL is ``{"kind", "profile", "fields", "timeout"}``, with ``"fields_expr"`` (Python, evaluated here) in place of
``fields`` for fields JSON cannot say cheaply (``{"body": [[]] * 2000000}``: one list held two million times).
``growth`` is how far the process's peak resident memory rose during the call: before each call the garbage is
collected, freed memory is handed back to the system (``malloc_trim``) and the peak is reset to the current
size (``/proc/self/clear_refs``), so each call is measured from a clean start. Calls ``warm`` (the same shape)
are made first and not reported: the first call of a kind imports its client.
"""

from __future__ import annotations

import ctypes
import gc
import json
import sys
import time
from typing import Any


def _status(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _clean_start() -> int:
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # resets VmHWM to the current resident size
    return _status("VmRSS")


def _short(value: Any) -> Any:
    if isinstance(value, str):
        return value[:200]
    if isinstance(value, (dict, list)):
        text = json.dumps(value)
        return json.loads(text) if len(text) <= 2000 else text[:200]
    return value


def main() -> None:
    from s2o_kernel.engine import default_settings, make_settings
    from s2o_kernel.engine.errors import S2OError
    from s2o_kernel.engine.outside.call import OutsideCall
    from s2o_kernel.engine.outside.gateway import Gateway
    from s2o_kernel.engine.settings import merge

    spec = json.load(sys.stdin)
    gateway = Gateway(make_settings(merge(default_settings().to_dict(), spec["settings"])))

    def call(row: dict[str, Any]) -> dict[str, Any]:
        fields = eval(row["fields_expr"]) if "fields_expr" in row else row.get("fields", {})  # the test's own text
        request = OutsideCall(row["kind"], row["profile"], fields, row.get("path", row["kind"]), row["timeout"])
        base = _clean_start()
        start = time.monotonic()
        out: dict[str, Any] = {}
        try:
            value = gateway.call_sync(request)
            out["code"] = "success"
        except S2OError as exc:
            value = None
            out.update(code=exc.code, message=exc.message[:500], path=exc.path,
                       json_path=(exc.details or {}).get("json_path"))
        except Exception as exc:  # what a contained call never raises: reported as such, the next call goes on
            value = None
            out.update(code=f"raised {type(exc).__name__}", message=str(exc)[:500])
        out["seconds"] = time.monotonic() - start
        out["growth"] = _status("VmHWM") - base
        if out["code"] == "success":
            out["value"] = _short(value)
        return out

    for row in spec.get("warm", []):
        call(row)
    for row in spec["calls"]:
        print(json.dumps(call(row)), flush=True)
    gateway.close()


if __name__ == "__main__":
    main()
