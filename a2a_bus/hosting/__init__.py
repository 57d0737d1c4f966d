"""a2a_bus/hosting."""
