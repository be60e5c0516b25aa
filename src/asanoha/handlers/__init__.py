"""Bundled features: consumer administration (``consumer_admin``), job administration
(``job_admin``), workflow runs (``workflow_admin``), features' configuration and secrets per
tenant (``feature_config``) and the demo application."""
