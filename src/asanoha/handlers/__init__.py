"""Bundled features: consumer administration (``consumer_admin``), job administration
(``job_admin``) and the demo application."""
