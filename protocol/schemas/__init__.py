"""Kafka message schemas (JSON, Kafka's format) for messages kafka-python does not ship."""
