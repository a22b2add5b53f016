"""The Aurora-compatible Thrift endpoint over the Peloton API."""
