"""a2a-bus: an actor-based multi-agent collaboration bus."""

__version__ = "0.1.0"

__all__ = ["__version__"]
