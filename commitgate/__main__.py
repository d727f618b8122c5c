"""``python -m commitgate`` is the ``commitgate`` command (the broker subprocess of the launcher)."""
from commitgate.cli.app import app

app()
