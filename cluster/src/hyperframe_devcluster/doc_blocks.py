"""The shell blocks of a Markdown section, so that a test runs a doc's commands exactly as written.

`section_blocks(README, "Train your own model")` returns the ```sh blocks under the heading
`## Train your own model`, in order, up to the next heading of the same or a higher level. The
end-to-end test runs them with bash and a unit test checks them against the files they name, so
the doc and what is tested cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

__all__ = ["DocSectionError", "section_blocks"]

_HEADING: Final = re.compile(r"^(#{1,6}) (.+?)\s*$")
_FENCE: Final = re.compile(r"^```(\S*)\s*$")


class DocSectionError(LookupError):
    """The Markdown file has no such section, or the section no ```sh block."""


def section_blocks(markdown: Path, heading: str, *, language: str = "sh") -> list[str]:
    """The ```<language> blocks of the section titled `heading` (any level), in order."""
    level = 0
    blocks: list[str] = []
    block: list[str] | None = None
    fence_language = ""
    for line in markdown.read_text(encoding="utf-8").splitlines():
        fence = _FENCE.match(line)
        if block is not None:
            if fence and not fence.group(1):
                if fence_language == language and level:
                    blocks.append("\n".join(block) + "\n")
                block = None
            else:
                block.append(line)
            continue
        if fence:
            block, fence_language = [], fence.group(1)
            continue
        title = _HEADING.match(line)
        if title is None:
            continue
        depth = len(title.group(1))
        if level and depth <= level:
            break
        if not level and title.group(2) == heading:
            level = depth
    if not level:
        raise DocSectionError(
            f"{markdown}: no section titled {heading!r}: add that heading or fix the title asked for"
        )
    if not blocks:
        raise DocSectionError(
            f"{markdown}: section {heading!r} has no ```{language} block: add the commands as one"
        )
    return blocks
