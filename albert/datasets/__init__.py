"""Offline datasets built from real text shipped in packages (no downloads at run time)."""
