"""The floor of the kernel benchmarks: a minimal ``ipykernel.kernelbase.Kernel`` subclass (issue 12).

``python -m benchmarks.floor_kernel -f CONNECTION_FILE`` runs it. Every ``execute_request`` gets the
constant ``execute_result`` ``2`` and an ``ok`` reply; nothing is evaluated, nothing is imported
beyond what ipykernel itself imports. It is the cost of being a wrapper kernel on ipykernel on this
machine (the field notes' ``floor``, section 8), against which the s2o kernel's start, round trip and
memory are divided.
"""

from __future__ import annotations

from typing import Any

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel


class FloorKernel(Kernel):
    """Answers every cell with the constant ``2``."""

    implementation = "floor"
    implementation_version = "1.0"
    language = "floor"
    language_version = "1.0"
    language_info = {"name": "floor", "mimetype": "text/plain", "file_extension": ".txt"}  # noqa: RUF012
    banner = "floor: a constant for every cell"

    async def do_execute(self, code: str, silent: bool, store_history: bool = True, user_expressions: Any = None,
                         allow_stdin: bool = False, *, cell_meta: Any = None, cell_id: Any = None) -> dict[str, Any]:
        """Publish the constant result and reply ``ok``."""
        if not silent:
            self.send_response(self.iopub_socket, "execute_result", {
                "execution_count": self.execution_count, "data": {"text/plain": "2"}, "metadata": {}})
        return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}


if __name__ == "__main__":
    IPKernelApp.launch_instance(kernel_class=FloorKernel)
