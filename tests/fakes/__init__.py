"""Fakes (not mocks) of the daemons' ports, shared by unit and integration tests."""
