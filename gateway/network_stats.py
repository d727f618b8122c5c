"""Counters of the broker's network layer, read by a metrics endpoint (``Broker.network``)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class NetworkStats:
    connections_open: int = 0
    connections_accepted: int = 0
    connections_refused_per_ip: int = 0  # beyond max.connections.per.ip: closed at once
    connections_closed_idle: int = 0  # connections.max.idle.ms
    accept_paused: int = 0  # times max.connections held the next client in the backlog
    oversized_frames: int = 0  # size prefix negative or above socket.request.max.bytes
    malformed_requests: int = 0  # undecodable header or body
    unsupported_requests: int = 0  # an API or version not served
    queued_request_bytes: int = 0  # charged to queued.max.request.bytes now
    request_memory_waits: int = 0  # times a connection waited for that memory
    warnings_suppressed: int = 0  # by the per-client rate limit of those warnings
    produce_refused: int = 0  # partitions' record sets refused by Produce validation
    tls_handshakes_failed: int = 0  # plaintext clients on TLS ports, untrusted certificates
    sasl_authentications: int = 0  # completed SASL logins and re-authentications
    sasl_authentication_failures: int = 0  # refused credentials, tokens, mechanisms' messages
