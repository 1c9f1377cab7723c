"""The openai provider: missions and sabotages written by a model through the official SDK."""
