"""Tests written in a review: each shows a suspected bug (see its docstring)."""
