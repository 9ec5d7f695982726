"""Is the process that wrote a record still alive?  Without trusting the pid alone.

A run killed with SIGKILL (OOM killer, ``kill -9``, a lost node) cannot update its ``status.json``,
which then says "running" forever.  Readers check the recorded process instead: same host, the pid
exists, and it is the same process.  Pids are reused, so the record also carries the process's start
time (``/proc/<pid>/stat``, in clock ticks since boot) and the boot id: a live pid whose start time
differs is another process, and the run is dead.  Where ``/proc`` is missing (macOS) only the pid is
checked.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Literal

Liveness = Literal["alive", "dead", "unknown"]


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def process_start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux), or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after its last ")"
    fields = raw[raw.rfind(")") + 2:].split()
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


def process_identity(pid: int | None = None) -> dict[str, Any]:
    """What identifies a process across pid reuse: pid, hostname, boot id and start time."""
    pid = os.getpid() if pid is None else pid
    identity: dict[str, Any] = {"pid": pid, "hostname": socket.gethostname()}
    boot, start = _boot_id(), process_start_ticks(pid)
    if boot is not None:
        identity["boot_id"] = boot
    if start is not None:
        identity["process_start"] = start
    return identity


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    return True


def liveness(record: dict[str, Any]) -> Liveness:
    """``alive``/``dead`` for the process a record names, ``unknown`` when this host cannot tell
    (another machine, or no pid recorded)."""
    pid = record.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return "unknown"
    host = record.get("hostname")
    if isinstance(host, str) and host != socket.gethostname():
        return "unknown"
    boot = record.get("boot_id")
    if isinstance(boot, str) and _boot_id() not in (None, boot):
        return "dead"  # the machine rebooted since
    if not _pid_exists(pid):
        return "dead"
    start = record.get("process_start")
    if isinstance(start, int) and not isinstance(start, bool):
        now = process_start_ticks(pid)
        if now is not None and now != start:
            return "dead"  # the pid was reused by another process
    return "alive"
