"""Bundled features: the demo application."""
