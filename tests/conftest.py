"""Shared fixtures. Service fixtures (PostgreSQL, RabbitMQ) live in tests/services.py."""
