"""Placeholder."""

CHECKS: list = []
