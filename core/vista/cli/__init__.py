"""The ``vista`` command line."""
