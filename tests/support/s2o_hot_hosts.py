"""Host functions the hot path's red-team tests grant through the allowlist (``s2o_hot_hosts.fetch``)."""

from __future__ import annotations


def fetch(url: str) -> str:
    """Stands for an HTTP client whose socket timed out at once (``socket.timeout`` is ``TimeoutError``)."""
    raise TimeoutError(f"connect to {url} timed out")
