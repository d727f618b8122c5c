"""The admin HTTP API (``admin.listeners``): Prometheus ``/metrics``, ``/healthz``, ``/readyz``
and the ``/v1/...`` query, topic and group endpoints, served by aiohttp on the broker's loop
(``server.py``). The top of the gateway: nothing on the Kafka path imports it (the counters the
request path bumps live in ``gateway/request_metrics.py``)."""
