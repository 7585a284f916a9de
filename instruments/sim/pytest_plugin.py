"""Pytest fixtures for a simulated LUMION bench (filled in by the instruments work)."""
