"""One self-contained HTML page per search run: the run's data as JSON inside the page, and the viewer's own
script and style inline. Nothing is fetched when the page is opened (no CDN, no file beside it), so the page
can be mailed or archived on its own."""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

from .load import find_runs, load_run

PAGE = "view.html"
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_MARKERS = {ord(c): f"⟨U+{ord(c):04X}⟩" for c in BIDI_CONTROLS}


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def render_page(run: dict[str, Any]) -> str:
    """The page for :func:`~proofrl.view.load.load_run`'s dict. The JSON is embedded in a
    ``<script type="application/json">`` with every ``<`` escaped, so no goal text can close the script; every
    string goes in through :func:`_for_page`."""
    run = _for_page(run)
    data = json.dumps(run, allow_nan=False, separators=(",", ":")).replace("<", "\\u003c")
    title = html.escape(f"proofrl search: {run.get('title', '')}")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>'
        f"<style>{_asset('viewer.css')}</style></head>\n<body><noscript>This page draws the search trees with "
        f'JavaScript.</noscript>\n<script type="application/json" id="proofrl-data">{data}</script>\n'
        f"<script>{_asset('viewer.js')}</script></body></html>\n"
    )


def write_view(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write one search run's page (default ``RUN_DIR/view.html``) and return its path."""
    run_dir = Path(run_dir)
    path = Path(out) if out is not None else run_dir / PAGE
    path.write_text(render_page(load_run(run_dir)), encoding="utf-8")
    return path


def write_views(root: str | Path) -> list[Path]:
    """A page for every search run at or below ``root`` (see :func:`~proofrl.view.load.find_runs`)."""
    return [write_view(run) for run in find_runs(root)]


def visible(text: str) -> str:
    """``text`` with each bidirectional control character as a marker (``⟨U+202E⟩``): shown as they are, they
    let a proof or a tactic read in another order than the one Coq was given."""
    return text.translate(_MARKERS)


def _for_page(x: Any) -> Any:
    """The run as the page shows it, every string and key through :func:`visible`, NaN and infinities (JSON that
    a browser's parser refuses) as strings. One walk over everything embedded, so no field the script draws,
    known to it or not, can bypass it."""
    if isinstance(x, str):
        return visible(x)
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return str(x)
    if isinstance(x, dict):
        return {_for_page(k): _for_page(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_for_page(v) for v in x]
    if x is None or isinstance(x, bool | int | float):
        return x
    return visible(str(x))  # what json.dumps could not write, as text
