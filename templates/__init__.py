"""Jinja2 templates and our CUDA headers (package data)."""
