"""``a2a-bus convert``: placeholder until the adaptor lands."""
