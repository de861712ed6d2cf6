"""Shared fixtures: engines and sessions built from settings dicts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from s2o_kernel.engine import Engine, Session, default_settings, make_settings

HELPERS_DIR = Path(__file__).parent / "conformance"
if str(HELPERS_DIR) not in sys.path:
    sys.path.insert(0, str(HELPERS_DIR))


def make_session(**settings) -> Session:
    """A fresh session on settings given as SPEC-10 keyword arguments (allowlist defaults to empty)."""
    settings.setdefault("allowlist", "")
    return Session(Engine(make_settings(settings)))


@pytest.fixture
def session_factory():
    return make_session


@pytest.fixture
def teaching():
    """A session on the embedded default configuration."""
    return Session(Engine(default_settings()))
