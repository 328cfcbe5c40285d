"""Text that came from a record, made safe to print or write.

A trace, a run folder or a study comes from anywhere, and its strings (an op name, a kernel
name, an error a worker reported) reach the terminal, report.md and report.html. A terminal
obeys the escape sequences in what it prints: ``ESC[2J`` clears it, ``ESC]0;...`` retitles
it, ``ESC]8;;URL`` hides a link, a carriage return overwrites the line it is on. So every
string from a record passes through `printable` before it is printed or written: the
terminal's consoles (`printable_console`, so that every renderer is covered at once), the
Markdown escaper and the HTML writer's templates.
"""

from __future__ import annotations

import re
from typing import Any, Final

#: C0 controls but tab and newline (carriage return included: it rewrites the line), DEL, the
#: C1 controls (0x9b is a one-byte CSI to some terminals), and the Unicode bidirectional
#: overrides and isolates that reorder what is shown (CVE-2021-42574, "Trojan Source").
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` without control characters (module doc); tab and newline stay."""
    return _CONTROL.sub("", text)


def printable_console(**kwargs: Any) -> Any:
    """A rich Console (`kwargs` as Console's) whose output is stripped of control characters.

    Every renderable, nested ones and a live display's included, is rendered through
    `Console.render`, and rich adds its own styling and cursor moves as separate control
    segments, so stripping the text of each content segment there covers every renderer at
    once and leaves rich's own escapes alone.
    """
    from rich.console import Console
    from rich.segment import Segment

    class PrintableConsole(Console):
        def render(self, renderable: Any, options: Any = None) -> Any:
            for segment in super().render(renderable, options):
                if segment.control or not _CONTROL.search(segment.text):
                    yield segment
                else:
                    yield Segment(printable(segment.text), segment.style)

    return PrintableConsole(**kwargs)
