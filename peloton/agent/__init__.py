"""The local host agent: runs tasks as real processes under a per-task supervisor."""
