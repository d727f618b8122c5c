"""What a SASL mechanism raises when a client's credentials are refused."""
from __future__ import annotations


class AuthenticationFailed(Exception):
    """The message is what the client is told (SASL_AUTHENTICATION_FAILED)."""
