"""The verification service (``proofrl serve``): kimina-lean-server's API over proofrl's prover pools."""

from .app import create_app
from .config import ServeConfig

__all__ = ["ServeConfig", "create_app"]
