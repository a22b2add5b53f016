"""The Peloton API: generated code, converters, gRPC servicers and the typed client."""
