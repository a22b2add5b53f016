"""Shared daemon machinery: goal-state engine, leader election, retries, config, metrics."""
