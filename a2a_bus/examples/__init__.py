"""The example agents, shipped with the package: what ``a2a-bus demo`` runs, and
what ``a2a-bus serve a2a_bus.examples.calculator:Calculator`` serves anywhere.

- :mod:`~a2a_bus.examples.calculator`: ``calc``, arithmetic and a streaming count;
- :mod:`~a2a_bus.examples.echo`: ``echo``, answers with what it was sent;
- :mod:`~a2a_bus.examples.news`: a news desk that publishes and readers that subscribe;
- :mod:`~a2a_bus.examples.concierge`: an LLM agent (a scripted model by default).
"""
