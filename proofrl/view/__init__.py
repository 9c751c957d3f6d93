"""``proofrl view RUN_DIR``: one self-contained HTML page per search run (``view.html`` beside its
``results.jsonl``) to look at every theorem's AND-OR tree in a browser, with nothing fetched at view time.

* :mod:`.load` reads a search run's files (``results.jsonl``, ``trees/``, ``trace.jsonl``, ``summary.json``).
* :mod:`.page` embeds them, with the viewer's own script and style (``viewer.js``, ``viewer.css``), in one page.
"""

from __future__ import annotations

from .load import find_runs, load_run
from .page import render_page, write_view, write_views

__all__ = ["find_runs", "load_run", "render_page", "write_view", "write_views"]
