"""Bundled features: consumer administration (``consumer_admin``), job administration
(``job_admin``), workflow runs (``workflow_admin``), features' configuration and secrets per
tenant (``feature_config``), personal access tokens (``token_admin``), personal data
(``personal_data``), projection rebuilds (``projection_admin``) and the demo application.

An application adds the ones it offers to its features; ``App`` adds by itself only what its
own declarations need (agent approvals, the retention job, workflow waits)."""
