"""kimina-prover-rl's claims: the error-correction turn, and the format reward."""

from __future__ import annotations

from .claim import NOT_QUOTED, Claim

CLAIMS: list[Claim] = [
    Claim(
        "kimina-error-correction",
        "kimina",
        "The error-correction turn raises the pass rate over the same budget without it.",
        NOT_QUOTED,
        "proved (0/1) per held-out theorem",
        "two samples",
        "sample + correction",
    ),
    Claim(
        "kimina-format-reward",
        "kimina",
        "The format reward does not lower the pass rate.",
        NOT_QUOTED,
        "pass@8 per held-out theorem",
        "without format reward",
        "with format reward",
        direction=-1,
    ),
]
