"""The client API: async (:class:`AsyncClient`) and sync (:class:`Client`).

A client is made by its bus (``bus.client()``, ``bus.async_client()``) with the
collaborators it uses: the dispatcher that sends, the JSON-RPC service, and
the portal into the bus loop.

- :mod:`~a2a_bus.client.aio`: the async client, on the bus loop or any other;
- :mod:`~a2a_bus.client.sync`: the blocking client, for other threads;
- :mod:`~a2a_bus.client.calls`: a batch's ``Call`` items and a page of events;
- :mod:`~a2a_bus.client.outgoing`: a stream from a caller to an agent.
"""

from a2a_bus.client.aio import AsyncClient
from a2a_bus.client.calls import Call, EventPage
from a2a_bus.client.sync import Client

__all__ = ["AsyncClient", "Call", "Client", "EventPage"]
