"""The name the vista agent loop is registered under in verl (kept apart so that importing it does
not import verl)."""

AGENT_NAME = "vista_agent"
