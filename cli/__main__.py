"""``python -m cli`` is the ``commitgate`` command (the broker subprocess of the launcher)."""
from cli.app import app

app()
