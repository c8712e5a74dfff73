"""Shared test helpers: paths to data, small factories."""
