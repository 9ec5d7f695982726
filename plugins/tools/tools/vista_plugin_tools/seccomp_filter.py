"""The seccomp filters of the python sandbox, compiled with libseccomp (through ctypes).

Why libseccomp rather than hand-written BPF: it knows every architecture's syscall numbers, checks
the architecture word first (a 32-bit ``int 0x80`` call or an x32 number from an x86-64 process is
killed instead of being misread as another syscall) and emits the same BPF the container runtimes
(Docker, podman, Flatpak) use.  The library (``libseccomp.so.2``) ships with every systemd-based
distribution; no Python binding is needed.

Two filters:

* :func:`sandbox_filter` — loaded by bubblewrap (``--seccomp FD``) before the interpreter starts:
  refuses the syscalls that reach the kernel's most dangerous surface (ptrace, mount, namespaces,
  kexec, bpf, perf, keyrings, modules, ...), any socket that is not AF_UNIX, and namespace flags on
  ``clone``.  ``clone3`` answers ENOSYS (its flags are in memory, where BPF cannot look), so libc
  falls back to ``clone``, whose flags are checked.
* :func:`no_exec_filter` — installed by the runner itself once the interpreter is up, so the
  untrusted code can no longer ``execve`` anything (not even a second, unhooked Python).
* :func:`single_process_filter` — installed by the runner where no cgroup bounds the whole run
  (:mod:`vista_plugin_tools.memory_cap`): no new processes, only threads, so the one process's
  RLIMIT_AS bounds the run's memory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
from dataclasses import dataclass

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_NE = 1
SCMP_CMP_MASKED_EQ = 7
AF_UNIX = 1
CLONE_THREAD = 0x00010000

#: Refused with EPERM: debugging other processes, changing the mount table or namespaces, loading
#: kernels/modules/BPF, perf counters, keyrings, clocks, swap, reboot, raw I/O ports, handle-based
#: file access (escapes bind mounts), io_uring (its own syscall surface), userfaultfd.
DENIED_SYSCALLS: tuple[str, ...] = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "unshare", "setns",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key",
    "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "syslog", "vhangup", "iopl", "ioperm", "quotactl", "lookup_dcookie", "fanotify_init",
    "open_by_handle_at", "name_to_handle_at", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
)
#: ``clone`` flags that would create a namespace (a nested user namespace is the usual first step of
#: a kernel exploit); refused when any is set.
NAMESPACE_CLONE_FLAGS: tuple[int, ...] = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)


class SeccompUnavailable(RuntimeError):
    """libseccomp is missing or refused to build the filter; the message says which."""


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


@dataclass(frozen=True)
class _Rule:
    syscall: str
    action: int
    conditions: tuple[tuple[int, int, int, int], ...] = ()  # (arg index, op, a, b)


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)  # SCMP_ACT_ERRNO(code)


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(f"libseccomp is not installed ({exc}); apt-get install libseccomp2") from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _compile(rules: list[_Rule]) -> bytes:
    """BPF program (``struct sock_filter`` array) for the native architecture: allow by default."""
    lib = _library()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        for rule in rules:
            number = lib.seccomp_syscall_resolve_name(rule.syscall.encode())
            if number < 0:  # not a syscall on this architecture (e.g. iopl on arm64): nothing to refuse
                continue
            conditions = (_ArgCmp * max(1, len(rule.conditions)))(*(_ArgCmp(*c) for c in rule.conditions))
            status = lib.seccomp_rule_add_array(ctx, rule.action, number, len(rule.conditions), conditions)
            if status < 0:
                raise SeccompUnavailable(f"seccomp_rule_add({rule.syscall}) failed: {os.strerror(-status)}")
        reader, writer = os.pipe()
        try:
            status = lib.seccomp_export_bpf(ctx, writer)
            os.close(writer)
            writer = -1
            if status < 0:
                raise SeccompUnavailable(f"seccomp_export_bpf failed: {os.strerror(-status)}")
            chunks = []
            while chunk := os.read(reader, 65536):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(reader)
            if writer >= 0:
                os.close(writer)
    finally:
        lib.seccomp_release(ctx)


@functools.lru_cache(maxsize=1)
def sandbox_filter() -> bytes:
    """The filter bubblewrap loads before the interpreter starts (see the module docstring)."""
    eperm = _errno_action(errno.EPERM)
    rules = [_Rule(name, eperm) for name in DENIED_SYSCALLS]
    rules.append(_Rule("clone3", _errno_action(errno.ENOSYS)))
    rules += [_Rule("clone", eperm, ((0, SCMP_CMP_MASKED_EQ, flag, flag),)) for flag in NAMESPACE_CLONE_FLAGS]
    no_family = _errno_action(errno.EAFNOSUPPORT)
    rules += [_Rule(name, no_family, ((0, SCMP_CMP_NE, AF_UNIX, 0),)) for name in ("socket", "socketpair")]
    return _compile(rules)


@functools.lru_cache(maxsize=1)
def no_exec_filter() -> bytes:
    """The filter the runner adds once Python is running: no further ``execve``/``execveat``."""
    eperm = _errno_action(errno.EPERM)
    return _compile([_Rule("execve", eperm), _Rule("execveat", eperm)])


def filter_fd(program: bytes) -> int:
    """A readable fd (memfd) holding ``program`` from its start, for ``bwrap --seccomp``."""
    fd = os.memfd_create("vista-seccomp", 0)  # not CLOEXEC: bwrap inherits it
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@functools.lru_cache(maxsize=1)
def single_process_filter() -> bytes:
    """No new processes: EPERM for ``fork``, ``vfork`` and ``clone`` without ``CLONE_THREAD`` (a
    thread shares the address space, and CLONE_THREAD requires CLONE_VM); ENOSYS for ``clone3``,
    whose flags BPF cannot read, so libc creates threads with ``clone``."""
    eperm = _errno_action(errno.EPERM)
    return _compile([_Rule("fork", eperm), _Rule("vfork", eperm),
                     _Rule("clone", eperm, ((0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0),)),
                     _Rule("clone3", _errno_action(errno.ENOSYS))])
