"""``python -m a2a_bus`` runs the ``a2a-bus`` command."""

from a2a_bus.cli import main

main()
