"""matplotlib, set up for inline SVG: Agg, text as <text> in a generic font, no metadata.

matplotlib is an optional dependency (the `plot` extra); without it the page renders its
tables and says how to get the charts.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Any, Final

from torchdoctor.core.text import printable

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MISSING_MATPLOTLIB: Final = (
    "Charts need matplotlib, which is not installed: pip install 'torchdoctor[plot]' "
    "and re-run torchdoctor report."
)

#: One palette for the phases everywhere they appear (colour-blind safe: Okabe-Ito).
PALETTE: Final = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#F0E442",
    "#999999",
)
#: Width of a chart on a laptop screen, in inches at matplotlib's 72 pt per inch SVG units.
WIDTH_IN: Final = 8.0

_RC: Final[dict[str, Any]] = {
    # Text stays text (selectable, small) in a generic family the browser resolves locally:
    # no font file is embedded and none is fetched.
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica", "sans-serif"],
    "font.size": 9,
    "svg.hashsalt": "torchdoctor",  # deterministic ids, so the same records give the same page
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 72,
}


def pyplot() -> Any | None:
    """matplotlib.pyplot on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    params: Any = plt.rcParams  # typed with a closed set of literal keys
    params.update(_RC)
    return plt


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^")]+)')


def to_svg(fig: Figure, name: str) -> str:
    """The figure as an <svg> element for inlining, its ids prefixed with the chart's name.

    Several SVGs inlined in one page share one id namespace; matplotlib numbers its ids per
    figure (`patch_1`, clip paths), so without the prefix a chart would clip to another's box.
    """
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    fig.clear()
    import matplotlib.pyplot as plt

    plt.close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = _ID.sub(lambda m: f'id="{name}-{m.group(1)}"', svg)
    return _REF.sub(lambda m: f"{m.group(1)}{name}-{m.group(2)}", svg)


def chart_text(text: str) -> str:
    """A record's string as matplotlib shows it literally: no control characters, and its
    `$` escaped, which would otherwise start mathtext (an op named `$\\foo$` fails to parse)."""
    return printable(text).replace("$", r"\$")
