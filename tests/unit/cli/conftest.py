"""Shares the example and patch helpers of tests/unit/api (api_helpers.py) with these tests."""

from __future__ import annotations

import sys
from pathlib import Path

_API_TESTS = str(Path(__file__).resolve().parents[1] / "api")
if _API_TESTS not in sys.path:
    sys.path.insert(0, _API_TESTS)
