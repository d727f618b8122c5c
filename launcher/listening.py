"""Which TCP ports a process listens on, from the kernel's tables (Linux): its socket inodes in
LISTEN state in /proc/net/tcp and tcp6. A connect that succeeds tells only that somebody
listens; this tells who."""
from __future__ import annotations

import os
from pathlib import Path

LISTEN = "0A"


def listening_ports(pid: int) -> set[int]:
    inodes = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:  # the process is gone
        return set()
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:  # no IPv6
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports
