"""a2a_bus/core."""
