"""The request loop every Python driver shares: one JSON request per stdin line, one answer per
stdout line (contract.py), dispatched to the driver's method of the same name."""
from __future__ import annotations

import json
import sys
import traceback


def serve(driver: object) -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # a library's prints must not break the answer stream
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        op = request.pop("op")
        try:
            answer = {"ok": getattr(driver, op)(**request) or {}}
        except Exception as exc:  # noqa: BLE001 - every failure is the client's answer
            answer = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0] + "\n"
                      + traceback.format_exc()}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    close = getattr(driver, "close", None)
    if close is not None:
        close()
