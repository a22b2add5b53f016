"""The `peloton` command line."""
