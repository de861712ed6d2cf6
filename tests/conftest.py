"""Shared fixtures: engines and sessions built from settings dicts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from s2o_kernel.engine import Engine, Session, bare_settings, default_settings

HELPERS_DIR = Path(__file__).parent / "conformance"
#: Helpers shared by the test groups (engine/, kernel/, security/, conformance/): the kernel harness,
#: the containment judge, host objects for the reach tests, the confinement probe.
SUPPORT_DIR = Path(__file__).parent / "support"
for _folder in (HELPERS_DIR, SUPPORT_DIR):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


def make_session(**settings) -> Session:
    """A fresh session on settings given as SPEC-10 keyword arguments (allowlist defaults to empty)."""
    settings.setdefault("allowlist", "")
    return Session(Engine(bare_settings(settings)))


@pytest.fixture
def session_factory():
    return make_session


@pytest.fixture
def teaching():
    """A session on the embedded default configuration."""
    return Session(Engine(default_settings()))
