"""Integrations with frameworks, each imported only by those who use it."""
