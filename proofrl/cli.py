"""The ``proofrl`` command line. Each command is a thin shell over a library function."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)

# Commands are registered below, one block each; implementations live in their packages.
# -- commands --


if __name__ == "__main__":
    app()
