"""Model backends shipped with the core."""
