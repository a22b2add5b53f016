"""Composition roots that run several daemons in one process (`peloton up`)."""
