"""a2a_bus/runtime."""
