"""Peloton for Python: a unified cluster resource scheduler."""

__version__ = "0.1.0"
