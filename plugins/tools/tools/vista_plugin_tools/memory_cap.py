"""How the python sandbox bounds the memory of a whole run, not of each of its processes.

Why: RLIMIT_AS caps one process. Code that forks (libc ``fork()`` through ``_cffi_backend`` or a
native extension, which the audit hook never sees) gets a fresh cap in every child: with
``memory_mb=256``, 8 children touching 200 MB each reached 1.7 GB. So one of two kernel layers
applies, chosen once per host and reported (a log line when the tool is made, and
``SandboxResult.memory_cap`` / the tool result's ``metadata["memory_cap"]`` on every call):

* ``cgroup-v2``: where this process may create cgroup v2 children with the ``memory`` and ``pids``
  controllers (a delegated cgroup: systemd ``Delegate=yes``, a container given its own cgroup
  namespace, or the folder named by ``$VISTA_SANDBOX_CGROUP``), each run gets its own cgroup with
  ``memory.max`` = ``memory_mb + disk_mb`` (its tmpfs pages are charged there too),
  ``memory.swap.max`` = 0 and ``pids.max`` = ``processes``. Every process of the run counts
  against one total, and the kernel's OOM killer stops the run at the cap.
* ``single-process``: otherwise. The run may not create processes at all: a seccomp filter answers
  EPERM to ``fork``, ``vfork`` and any ``clone`` without ``CLONE_THREAD`` (threads share the address
  space, so they stay inside the one RLIMIT_AS), and ``clone3`` answers ENOSYS so libc falls back
  to ``clone``. One process under RLIMIT_AS = ``memory_mb`` is then the whole run.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_ENV = "VISTA_SANDBOX_CGROUP"
CONTROLLERS = ("memory", "pids")


@dataclass(frozen=True)
class MemoryCap:
    """The per-run memory layer this host allows; ``parent`` is the cgroup runs are created under."""

    mode: str  # "cgroup-v2" or "single-process"
    reason: str
    parent: Path | None = None

    @property
    def layer(self) -> str:
        """Name in ``SandboxResult.layers`` (no commas: the layer list is comma-joined)."""
        return "cgroup-v2(memory.max+pids.max)" if self.mode == "cgroup-v2" else "single-process"

    def describe(self, memory_mb: int, disk_mb: int) -> str:
        if self.mode == "cgroup-v2":
            return (f"cgroup v2 under {self.parent}: memory.max={memory_mb + disk_mb} MB (memory_mb + disk_mb) "
                    "for all the run's processes together")
        return (f"one process per run (fork/vfork/clone refused by seccomp) under RLIMIT_AS={memory_mb} MB, "
                f"because {self.reason}")


def _cgroup2_mounts() -> list[Path]:
    mounts = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            if " - cgroup2 " in line and len(fields) > 4:
                mounts.append(Path(fields[4]))
    return mounts


def _own_cgroup() -> str | None:
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def _candidates() -> list[Path]:
    named = os.environ.get(CGROUP_ENV)
    if named:
        return [Path(named)]
    own = _own_cgroup()
    if own is None:
        return []
    return [mount / own.lstrip("/") for mount in _cgroup2_mounts()]


def _usable(folder: Path) -> str | None:
    """Why runs cannot get their own cgroup under ``folder``, or ``None`` when they can (checked by
    creating one, writing its limits and removing it)."""
    try:
        available = (folder / "cgroup.controllers").read_text().split()
    except OSError as exc:
        return f"{folder} is not a cgroup v2 folder ({exc.strerror})"
    missing = [c for c in CONTROLLERS if c not in available]
    if missing:
        return f"the cgroup {folder} has no {'/'.join(missing)} controller"
    try:
        enabled = (folder / "cgroup.subtree_control").read_text().split()
    except OSError as exc:  # one unreadable candidate must not stop detect() from trying the next
        return f"cannot read {folder / 'cgroup.subtree_control'} ({exc.strerror})"
    if any(c not in enabled for c in CONTROLLERS):
        try:
            (folder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in CONTROLLERS))
        except OSError as exc:
            return (f"the {'/'.join(CONTROLLERS)} controllers cannot be enabled for children of {folder} "
                    f"({exc.strerror}); delegate a cgroup and name it in ${CGROUP_ENV}")
    probe = folder / f"vista-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        (probe / "memory.max").write_text(str(64 * 2**20))
        (probe / "pids.max").write_text("8")
    except OSError as exc:
        return f"cannot create a cgroup under {folder} ({exc.strerror})"
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()
    return None


@functools.lru_cache(maxsize=1)
def detect() -> MemoryCap:
    """The layer this host allows, decided once per process."""
    reasons = []
    for folder in _candidates():
        why = _usable(folder)
        if why is None:
            return MemoryCap("cgroup-v2", "", folder)
        reasons.append(why)
    reason = "; ".join(reasons) or "this host has no cgroup v2 hierarchy for this process"
    return MemoryCap("single-process", reason)


class RunCgroup:
    """One run's cgroup: created with its limits, joined by the launcher, killed and removed after."""

    def __init__(self, parent: Path, memory_bytes: int, processes: int) -> None:
        self.path = parent / f"vista-sandbox-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        try:
            (self.path / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(FileNotFoundError):  # no swap accounting on this kernel
                (self.path / "memory.swap.max").write_text("0")
            (self.path / "pids.max").write_text(str(processes))
        except BaseException:
            self.path.rmdir()
            raise

    def launcher(self, argv: list[str]) -> list[str]:
        """``argv`` run by a shell that first moves itself into this cgroup, so that every process the
        run ever creates starts inside it (no window in which a child could escape the limit)."""
        return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *argv]

    def peak_bytes(self) -> int | None:
        """Highest memory use of the run (``memory.peak``, kernel 5.19+)."""
        try:
            return int((self.path / "memory.peak").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_kills(self) -> int:
        try:
            for line in (self.path / "memory.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def close(self) -> None:
        """Kill whatever is left in the cgroup and remove it."""
        deadline = time.monotonic() + 5.0
        while True:
            try:
                self.path.rmdir()
                return
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    return
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise
            if (self.path / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (self.path / "cgroup.kill").write_text("1")
            else:
                with contextlib.suppress(OSError):
                    for pid in (self.path / "cgroup.procs").read_text().split():
                        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                            os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.02)
