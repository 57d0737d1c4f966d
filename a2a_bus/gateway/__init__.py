"""The HTTP gateway: JSON-RPC 2.0, the CloudEvents HTTP binding, SSE, discovery, metrics."""

from a2a_bus.gateway.app import create_app
from a2a_bus.gateway.auth import Access, Authenticator
from a2a_bus.gateway.settings import GatewaySettings, load_tokens

__all__ = ["Access", "Authenticator", "GatewaySettings", "create_app", "load_tokens"]
