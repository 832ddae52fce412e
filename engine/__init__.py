"""The engine: one worker that answers requests one at a time with a local LLM."""
