"""Archiver: moves finished jobs out of hot storage into a cold archive."""
