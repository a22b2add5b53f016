"""Placement engine daemon: matches ready gangs with host leases."""
