"""``python -m gateway`` is the ``commitgate`` command."""
from gateway.cli import app

app()
