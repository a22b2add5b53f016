"""Schema migrations and the backend-to-backend copy and verify tool."""
