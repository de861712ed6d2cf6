"""Replay protection: the kernel's compact signature memory (``s2o_kernel/kernel/replay.py``).

The rule is jupyter_client's: a message whose signature was seen is refused. These tests check that
:class:`ReplayGuardSession` refuses exactly what the stock ``Session`` refuses, that its memory
stays bounded and small, and that a real kernel runs a replayed ``execute_request`` once.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from queue import Empty

import pytest
from jupyter_client.session import Session
from kernel_harness import execute, running_kernel, shell_reply

from s2o_kernel.bounds import REPLAY_BATCH
from s2o_kernel.kernel.replay import DigestHistory, ReplayGuardSession

KEY = b"a-test-key"


def signed(session: Session, n: int) -> list[list[bytes]]:
    """``n`` distinct signed ``execute_request`` messages as the wire frames after the delimiter."""
    frames = []
    for i in range(n):
        msg = session.msg("execute_request", {"code": f"{i}"})
        wire = session.serialize(msg)
        frames.append(wire[wire.index(b"<IDS|MSG>") + 1 :])
    return frames


def test_a_seen_signature_is_refused_as_the_stock_session_refuses_it() -> None:
    ours, stock = ReplayGuardSession(key=KEY), Session(key=KEY)
    messages = signed(Session(key=KEY), 3 * REPLAY_BATCH)
    for frames in messages:
        assert ours.deserialize(frames)["content"] == stock.deserialize(frames)["content"]
    # every one of them, whether still in the latest batch or merged, is now a replay
    for frames in messages[:: REPLAY_BATCH // 4] + messages[-3:]:
        for session in (ours, stock):
            with pytest.raises(ValueError, match="Duplicate Signature"):
                session.deserialize(frames)


def test_a_bad_signature_is_remembered_and_still_refused_as_invalid() -> None:
    ours = ReplayGuardSession(key=KEY)
    frames = signed(Session(key=b"another key"), 1)[0]
    with pytest.raises(ValueError, match="Invalid Signature"):
        ours.deserialize(frames)
    with pytest.raises(ValueError, match="Duplicate Signature"):
        ours.deserialize(frames)


def test_any_bytes_have_a_fingerprint_and_other_types_are_never_seen() -> None:
    history = DigestHistory()
    odd = [b"", b"\x00" * 100, "é".encode(), bytes(range(256)), b"not hex at all"]
    for signature in odd:
        history.add(signature)
    assert all(signature in history for signature in odd)
    assert bytearray(b"not hex at all") in history
    assert memoryview(b"not hex at all") in history
    assert b"never sent" not in history
    for other in ("not hex at all", None, 7, ["x"]):
        assert other not in history
    with pytest.raises(TypeError):
        history.add("a str")  # type: ignore[arg-type]


def test_the_memory_is_capped_at_its_size_and_forgets_at_random_as_the_stock_one() -> None:
    messages = signed(Session(key=KEY), 2500)
    for session in (ReplayGuardSession(key=KEY, digest_history_size=1000), Session(key=KEY, digest_history_size=1000)):
        for frames in messages:
            session.deserialize(frames)
            assert len(session.digest_history) <= 1000
        remembered = [frames[0] in session.digest_history for frames in messages]
        # a cull forgets a tenth (1,001 -> 901), so 901 to 1,000 remain, the latest always among them
        assert 901 <= sum(remembered) == len(session.digest_history) <= 1000
        assert remembered[-1]
        assert sum(remembered[:1000]) < 1000  # the oldest were forgotten, at random


def test_size_zero_remembers_nothing() -> None:
    ours = ReplayGuardSession(key=KEY, digest_history_size=0)
    frames = signed(Session(key=KEY), 1)[0]
    ours.deserialize(frames)
    ours.deserialize(frames)
    assert len(ours.digest_history) == 0


def test_a_clone_has_its_own_copy_of_the_memory() -> None:
    ours = ReplayGuardSession(key=KEY)
    first, second = signed(Session(key=KEY), 2)
    ours.deserialize(first)
    twin = ours.clone()
    assert isinstance(twin, ReplayGuardSession) and twin.key == KEY
    with pytest.raises(ValueError, match="Duplicate Signature"):
        twin.deserialize(first)
    twin.deserialize(second)
    ours.deserialize(second)  # the twin's memory is not the original's


def test_a_full_memory_holds_a_fraction_of_the_stock_ones_bytes() -> None:
    """65,536 signatures (the stock size, reached after as many messages), each a new bytes object
    as ``deserialize`` hands it over: ~8.8 MiB in the stock set, under 1 MiB here."""
    sizes = []
    for history in (DigestHistory(), set()):
        tracemalloc.start()
        for i in range(2**16):
            history.add(f"{i:064x}".encode())
        sizes.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
    ours, stock = sizes
    assert ours < 1024 * 1024 and 8 * ours < stock


def test_a_kernel_runs_a_replayed_execute_request_once(kernels_dir: Path, kernel_cwd: Path) -> None:
    with running_kernel(kernels_dir, kernel_cwd) as (_, kc):
        msg = kc.session.msg(
            "execute_request",
            {"code": "1 + 1", "silent": False, "store_history": True, "user_expressions": {},
             "allow_stdin": False, "stop_on_error": True},
        )
        wire = kc.session.serialize(msg)
        kc.shell_channel.socket.send_multipart(wire)
        first = shell_reply(kc, msg["header"]["msg_id"])["content"]
        assert first["status"] == "ok"
        kc.shell_channel.socket.send_multipart(wire)  # the same bytes, captured and resent
        reply, _ = execute(kc, "2 + 2")
        assert reply["execution_count"] == first["execution_count"] + 1
        with pytest.raises(Empty):
            while True:
                late = kc.get_shell_msg(timeout=0.5)
                assert late["parent_header"].get("msg_id") != msg["header"]["msg_id"], late
