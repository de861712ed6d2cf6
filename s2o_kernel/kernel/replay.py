"""Replay protection in a bounded, compact form: the message signatures a kernel has seen.

jupyter_client's ``Session.deserialize`` refuses a message whose HMAC signature it has already
seen ("Duplicate Signature"): a captured ``execute_request`` resent byte for byte carries a valid
signature, and only this memory stops it from running again (an s2o cell can spend
``limits.llm_cost`` and reach outside services, so a replay is not harmless). The stock memory is a
``set`` of the 64-byte hex signatures, up to ``Session.digest_history_size`` (2**16) of them, with a
random tenth forgotten each time it is full: about 8 MiB of Python objects (~10.5 MiB of the
process's memory) once 65,536 messages have arrived, the largest part of any ipykernel kernel's
growth over a long session (docs/performance.md, "Memory after 100,000 cells").

:class:`ReplayGuardSession` keeps the same rule, the same size and the same random forgetting, and
stores a 64-bit fingerprint of each signature (BLAKE2b, 8 bytes) in a sorted ``array('Q')`` plus a
small set of the latest :data:`REPLAY_BATCH`: ~0.6 MiB at 65,536 signatures. A signature seen is always
refused (same bytes, same fingerprint); a new one is refused wrongly only if its fingerprint
equals one of the at most 65,536 remembered, a chance of about 2**-48 per message. Signatures are
arbitrary bytes (the check runs before the HMAC is verified, so a peer without the key can send
anything); every byte string has a fingerprint.
"""

from __future__ import annotations

import bisect
import hashlib
import random
from array import array
from typing import Any

from jupyter_client.session import Session
from traitlets import Instance

from s2o_kernel.bounds import REPLAY_BATCH


def fingerprint(signature: bytes | bytearray | memoryview) -> int:
    """The 64-bit fingerprint of a message signature (any bytes): BLAKE2b with an 8-byte digest.

    Raises ``TypeError`` for anything that is not a bytes-like object.
    """
    return int.from_bytes(hashlib.blake2b(signature, digest_size=8).digest(), "big")


class DigestHistory:
    """The fingerprints of the signatures seen: a sorted ``array('Q')`` and a set of the latest.

    Supports what :class:`ReplayGuardSession` and ``Session.deserialize`` ask of the stock
    ``digest_history`` set: ``signature in history`` (``bytes``), :meth:`add`, ``len()``; and
    :meth:`cull`, the stock random forgetting. Membership costs one BLAKE2b of the signature, a set
    lookup and a binary search (~1 µs).
    """

    def __init__(self) -> None:
        """An empty history."""
        self._recent: set[int] = set()
        self._merged = array("Q")

    def __len__(self) -> int:
        """How many signatures are remembered."""
        return len(self._recent) + len(self._merged)

    def __contains__(self, signature: object) -> bool:
        """Whether ``signature`` (bytes-like) was seen; ``False`` for anything else."""
        if not isinstance(signature, (bytes, bytearray, memoryview)):
            return False
        key = fingerprint(signature)
        if key in self._recent:
            return True
        at = bisect.bisect_left(self._merged, key)
        return at < len(self._merged) and self._merged[at] == key

    def add(self, signature: bytes | bytearray | memoryview) -> None:
        """Remember ``signature``. Raises ``TypeError`` for anything that is not bytes-like."""
        self._recent.add(fingerprint(signature))
        if len(self._recent) >= REPLAY_BATCH:
            self._merge()

    def cull(self, size: int) -> None:
        """Forget a random tenth of the fingerprints, and at least down to ``size``: the stock rule.

        ``size`` ≤ 0 forgets everything.
        """
        self._merge()
        current = len(self._merged)
        forget = max(current // 10, current - size)
        if forget >= current:
            self._merged = array("Q")
            return
        kept = random.sample(self._merged.tolist(), current - forget)
        kept.sort()
        self._merged = array("Q", kept)

    def copy(self) -> DigestHistory:
        """An independent history with the same fingerprints."""
        twin = DigestHistory()
        twin._recent = set(self._recent)
        twin._merged = array("Q", self._merged)
        return twin

    def _merge(self) -> None:
        """Move the latest fingerprints into the sorted array."""
        if not self._recent:
            return
        merged = self._merged.tolist()
        merged.extend(self._recent)
        merged.sort()
        self._merged = array("Q", merged)
        self._recent = set()


class ReplayGuardSession(Session):
    """jupyter_client's ``Session`` with its replay memory kept as :class:`DigestHistory`.

    Same configuration (``--Session.digest_history_size=N``; 0 remembers nothing), same refusal
    (``ValueError("Duplicate Signature: ...")`` from ``deserialize``), same forgetting; only the
    storage differs. The kernel app makes the kernel's session one of these.
    """

    # The trait holds a DigestHistory where the base declares a set: jupyter_client asks only `in` of
    # it outside the three methods below, which this class overrides.
    digest_history = Instance(DigestHistory, args=())  # type: ignore[assignment]

    def _add_digest(self, signature: bytes) -> None:
        """Remember a received message's signature; forget a tenth once past the size."""
        if self.digest_history_size == 0:
            return
        self.digest_history.add(signature)
        if len(self.digest_history) > self.digest_history_size:
            self._cull_digest_history()

    def _cull_digest_history(self) -> None:
        """Forget a random tenth of the remembered signatures (the stock rule)."""
        self.digest_history.cull(self.digest_history_size)

    def clone(self) -> ReplayGuardSession:
        """A copy of this session with its own copy of the replay memory (``Session.clone``)."""
        twin = type(self)()
        values: dict[str, Any] = {
            name: getattr(self, name) for name in self.traits() if name != "digest_history"
        }
        for name, value in values.items():
            setattr(twin, name, value)
        twin.digest_history = self.digest_history.copy()
        return twin
