"""a2a_bus/discovery."""
