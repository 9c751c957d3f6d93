"""The verification service (``proofrl serve``): kimina-lean-server's API over proofrl's prover pools."""

from .app import ServerConfig, create_app

__all__ = ["ServerConfig", "create_app"]
