"""The admin HTTP API (``admin.listeners``): Prometheus ``/metrics``, ``/healthz``, ``/readyz``
and the ``/v1/...`` query, topic and group endpoints, served by aiohttp on the broker's loop
(``server.py``). Nothing here is imported by the Kafka path but ``metrics.RequestMetrics``,
the counters the request path bumps."""
