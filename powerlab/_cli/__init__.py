"""Subcommands of the ``powerlab`` console script, one module each (``register(sub)``)."""
