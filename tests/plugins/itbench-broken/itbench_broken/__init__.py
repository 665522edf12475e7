"""Broken plugins for the plugin-isolation tests."""
