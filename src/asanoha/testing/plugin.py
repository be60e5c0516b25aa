"""pytest plugin: the ``asanoha_stack`` fixture."""
