"""Bundled features: consumer administration (``consumer_admin``) and the demo application."""
