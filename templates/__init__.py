"""Jinja2 templates and our CUDA headers (package data), and the numeric constants they
share with Python (``constants``)."""
