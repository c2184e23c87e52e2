"""docs/smoke-gate.md's troubleshooting table must equal the code's remedy table."""

from __future__ import annotations

import re
from pathlib import Path

from hyperframe.smoke_remedies import FAILURES

DOC = Path(__file__).resolve().parents[3] / "docs" / "smoke-gate.md"
_ROW = re.compile(r"^\| `(?P<id>[a-z0-9.-]+)` \| (?P<exit>\d) \| (?P<summary>[^|]+) \| (?P<remedy>.+) \|$")


def test_troubleshooting_table_matches_the_code() -> None:
    rows = {m["id"]: m for line in DOC.read_text().splitlines() if (m := _ROW.match(line))}
    assert sorted(rows) == sorted(FAILURES), (
        "docs/smoke-gate.md and hyperframe.smoke_remedies list different ids"
    )
    for reason_id, entry in FAILURES.items():
        row = rows[reason_id]
        assert int(row["exit"]) == entry.exit_code, reason_id
        assert row["summary"].strip() == entry.summary, reason_id
        assert row["remedy"].strip() == entry.remedy, reason_id
