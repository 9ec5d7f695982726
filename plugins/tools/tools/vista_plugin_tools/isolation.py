"""OS-level isolation of the python sandbox with bubblewrap (``bwrap``), as Flatpak and nsjail do it.

Why: a PEP 578 audit hook only sees Python-level actions; native code (an extension module the code
wrote, OpenCV's or SQLite's own file I/O) walks straight past it.  So the child runs inside:

* new mount, PID, network, IPC, UTS and cgroup namespaces (plus a user namespace when the caller is
  not root), whose root is an empty read-only tmpfs holding only read-only binds of the system
  libraries, the Python installation and the venv, a fresh ``/proc`` and minimal ``/dev``, and one
  writable folder, ``/sandbox/work``: an in-memory tmpfs capped in size (the disk quota), seeded by
  the parent.  The only host files it can write are its stdout/stderr and one file that carries
  saved images back, each capped by RLIMIT_FSIZE.  No ``/tmp``, no ``/etc`` beyond the loader cache
  and local time, no home, no repository, no network but the namespace's own loopback;
* a non-root user: the host's ``nobody`` (uid 65534).  As root, bubblewrap builds the mounts with
  root's own privileges (no user namespace needed) and ``setpriv`` drops to uid/gid 65534, no groups,
  no capabilities and ``no_new_privs`` before Python starts — a real unprivileged uid on the host,
  stronger than a user namespace whose uid maps back to root.  As non-root, bubblewrap's user
  namespace maps uid 65534 inside to the caller;
* the seccomp filter of :mod:`vista_plugin_tools.seccomp_filter`.

The runner (``_sandbox_runner.py``) then adds rlimits, a no-exec seccomp filter and the audit hook.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from vista_plugin_tools.seccomp_filter import SeccompUnavailable, filter_fd, sandbox_filter

NOBODY = 65534
SANDBOX = "/sandbox"
WORKDIR = f"{SANDBOX}/work"
CODE_PATH = f"{SANDBOX}/main.py"
RUNNER_PATH = f"{SANDBOX}/runner.py"
SETPRIV_PATH = f"{SANDBOX}/bin/setpriv"
EXPORT_PATH = f"{SANDBOX}/result.bin"
LIBRARY_DIRS = ("/lib", "/lib32", "/lib64", "/libx32", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32")
SHARED_DATA = ("/usr/share/fonts", "/usr/share/zoneinfo")
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")
NAMESPACE_FLAGS = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
SETUP_HINT = ("install it with `apt-get install -y bubblewrap` (scripts/setup.d/sandbox.sh does this), or opt in "
              "to the weaker process-only sandbox with the tool config isolation=\"process\"")


class IsolationUnavailable(RuntimeError):
    """This host cannot give the python tool its OS-level isolation; the message says why."""


def python_roots() -> list[str]:
    """Folders the interpreter needs: its installation, the venv, and where its binary really is."""
    roots = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    paths = sysconfig.get_paths()
    roots.update(paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths)
    real = {os.path.realpath(root) for root in roots if os.path.isdir(root)}
    return _outermost(real | {root for root in roots if os.path.isdir(root)})


def _outermost(paths: set[str]) -> list[str]:
    """Drop paths inside others, so each tree is bound once."""
    kept: list[str] = []
    for path in sorted(paths):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _parents(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _setpriv() -> str | None:
    found = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    return os.path.realpath(found) if found else None


def mount_args(binds: list[tuple[str, str, bool]]) -> list[str]:
    """bwrap arguments for the read-only system view plus ``binds`` (source, target, writable).

    bwrap creates missing parent folders 0700 when run as root, which the nobody user then cannot
    walk, so every parent is made explicitly with mode 0755 first."""
    args: list[str] = []
    targets: list[tuple[str, str, str]] = []  # (option, source, target)
    for folder in LIBRARY_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            targets.append(("--ro-bind", folder, folder))
    python = python_roots()
    covered = [*python, *(t for _, _, t in targets)]
    for path in (*SHARED_DATA, *ETC_FILES):
        if os.path.exists(path) and not any(path.startswith(root.rstrip("/") + "/") for root in covered):
            targets.append(("--ro-bind", path, path))
    targets += [("--ro-bind", root, root) for root in python]
    targets += [("--bind" if writable else "--ro-bind", source, target) for source, target, writable in binds]
    made: set[str] = set()
    dirs: list[str] = []
    for _, _, target in targets:
        for parent in _parents(target):
            if parent not in made:
                made.add(parent)
                dirs += ["--perms", "0755", "--dir", parent]
    for option, source, target in targets:
        dirs += [option, source, target]
    return args + dirs + ["--proc", "/proc", "--dev", "/dev"]


def bwrap_command(bwrap: str, binds: list[tuple[str, str, bool]], seccomp_fd: int, python_args: list[str],
                  chdir: str = WORKDIR, extra: list[str] | None = None) -> list[str]:
    """The full command: bwrap with namespaces, mounts (then ``extra`` bwrap arguments) and seccomp,
    then (as root) setpriv, then Python."""
    as_root = os.geteuid() == 0
    command = [bwrap, *NAMESPACE_FLAGS, "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    prefix: list[str] = []
    if as_root:
        setpriv = _setpriv()
        if setpriv is None:
            raise IsolationUnavailable("setpriv (util-linux) is missing, so the sandbox cannot drop from root")
        binds = [*binds, (setpriv, SETPRIV_PATH, False)]
        # Only the two capabilities setpriv needs survive into the sandbox, and setpriv clears them.
        command += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        prefix = [SETPRIV_PATH, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--no-new-privs", "--"]
    else:
        command += ["--unshare-user", "--disable-userns", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    command += mount_args(binds) + list(extra or [])
    command += ["--remount-ro", "/", "--chdir", chdir, "--seccomp", str(seccomp_fd), "--", *prefix,
                sys.executable, *python_args]
    return command


def describe_layers() -> list[str]:
    """Layer names for ``SandboxResult.layers`` (the list is comma-joined, so no commas inside)."""
    drop = "setpriv" if os.geteuid() == 0 else "user-namespace"
    return ["namespaces(mount+pid+net+ipc+uts)", f"uid-{NOBODY}({drop})", "seccomp"]


@functools.lru_cache(maxsize=8)
def problem(bwrap: str) -> str | None:
    """Why this host cannot run the namespaces sandbox with ``bwrap``, or ``None`` when it can.

    Checked once per bwrap path by starting a real sandbox with a trivial program."""
    found = shutil.which(bwrap)
    if found is None:
        return f"bubblewrap was not found at {bwrap!r}; {SETUP_HINT}"
    try:
        program = sandbox_filter()
    except SeccompUnavailable as exc:
        return f"cannot build the seccomp filter: {exc}"
    fd = filter_fd(program)
    try:
        check = "import os, sys; sys.exit(0 if os.getuid() != 0 else 3)"
        command = bwrap_command(found, [], fd, ["-I", "-S", "-c", check], chdir="/")
        done = subprocess.run(command, pass_fds=(fd,), capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, check=False)
    except IsolationUnavailable as exc:
        return str(exc)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap at {found!r} could not be started: {exc}; {SETUP_HINT}"
    finally:
        os.close(fd)
    if done.returncode == 3:
        return "the sandboxed process still ran as root"
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return (f"bubblewrap at {found!r} cannot create the sandbox on this host ({detail}); user or mount "
                f"namespaces may be disabled (a container without CAP_SYS_ADMIN, or "
                f"kernel.unprivileged_userns_clone=0); {SETUP_HINT}")
    return None
