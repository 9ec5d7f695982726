"""The first code that runs in a sandbox process, before the untrusted code (stdlib only).

It is started as ``python -I _sandbox_runner.py CONFIG_JSON`` by :mod:`vista_plugin_tools.sandbox`:
by default inside bubblewrap's namespaces as the nobody user under a seccomp filter (see
:mod:`vista_plugin_tools.isolation`; the parent names those layers), or, in the weaker opt-in
``isolation="process"`` mode, as a plain child process.  It applies, in order, what its config asks:

1. (namespaces) refuse to run if still root; a second seccomp filter that refuses
   ``execve``/``execveat``, so nothing can start a program, not even a second Python without the hook;
   (either mode, where no cgroup bounds the whole run) a filter that refuses new processes (fork,
   vfork, clone without CLONE_THREAD), so RLIMIT_AS on this one process bounds the run's memory;
2. (process) a private network namespace (``unshare(CLONE_NEWNET)``; as non-root together with a
   user namespace), so even a raw socket reaches nothing;
3. resource limits: CPU seconds, address space, size of any written file (stdout/stderr are files),
   open files, no core dumps, and a process cap;
4. (process, as root) drop to the ``nobody`` user when it can still read the Python installation;
5. ctypes unloaded (the runner needed it above) and an audit hook (PEP 578) that cannot be removed
   from Python: it refuses sockets, process creation (fork, exec, spawn, subprocess, os.system),
   signals to other processes, importing ctypes again, ctypes' audited entry points, tracing and gc
   introspection, and file access outside the working directory (reads are also allowed inside the
   Python installation, so imports work).  The hook gives common attempts a clear message; it is not
   the boundary: native code (an extension module the code writes, ``_cffi_backend``) never raises
   audit events, and what contains it is the kernel layers above (namespaces, seccomp, rlimits and
   the per-run memory cap).

Then it runs the code with the working directory as cwd and (namespaces) exports the images it saved
through the one host file it may write.  The parent enforces wall time and kills the whole sandbox.
"""

import gc
import json
import os
import resource
import signal
import stat
import sys
import traceback

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
NOBODY = 65534


def isolate_network():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET
    if libc.unshare(flags) == 0:
        return "network-namespace"
    return f"no-network-namespace(errno {ctypes.get_errno()})"


def install_filter(program_hex, name):
    """Install a parent-compiled BPF program (libseccomp output): the no-exec filter (execve and
    execveat refused) or the single-process one (fork, vfork and non-thread clone refused)."""
    import ctypes

    program = bytes.fromhex(program_hex)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(38, 1, None, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    fprog = SockFprog(len(program) // 8, program)
    if libc.prctl(22, 2, ctypes.cast(ctypes.byref(fprog), ctypes.c_void_p), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        raise OSError(ctypes.get_errno(), f"installing the {name} seccomp filter failed")
    return name


def forget_ctypes():
    """Unload ctypes, which the runner needed for prctl/unshare, before the untrusted code starts.

    Its ready-made foreign functions (``ctypes.memmove``, ``memset``, ``cast``) raise no audit event
    when called, so a loaded ctypes would let Python code write anywhere in the process. Unloaded,
    ``import ctypes`` must load ``_ctypes`` again, which the audit hook refuses. This narrows the
    Python-level surface only: native code (an extension the code writes, ``_cffi_backend``) still
    runs in-process, and the kernel layers are what contain it."""
    for name in [name for name in sys.modules if name in ("ctypes", "_ctypes") or name.startswith("ctypes.")]:
        del sys.modules[name]
    gc.collect()


def apply_limits(limits):
    def cap(which, value):
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            soft, hard = resource.getrlimit(which)
            if hard == resource.RLIM_INFINITY or value <= hard:
                raise
            resource.setrlimit(which, (hard, hard))

    seconds = int(limits["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))  # SIGXCPU first, SIGKILL a second later
    cap(resource.RLIMIT_AS, int(limits["memory_bytes"]))
    cap(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    cap(resource.RLIMIT_NOFILE, int(limits["open_files"]))
    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_NPROC, int(limits["processes"]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a full file raises OSError instead of killing


def readable_by_everyone(path):
    """Every ancestor searchable and the path itself readable by "other" (so nobody can import)."""
    current = os.path.realpath(path)
    if not os.stat(current).st_mode & stat.S_IROTH:
        return False
    while True:
        if not os.stat(current).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(current)
        if parent == current:
            return True
        current = parent


def drop_privileges(read_roots):
    if os.geteuid() != 0:
        return "unprivileged-user"
    if not all(readable_by_everyone(root) for root in read_roots if os.path.exists(root)):
        return "still-root(python-install-not-readable-by-nobody)"
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    return "dropped-to-nobody"


def disable_raw_spawn():
    """``subprocess`` reaches fork+exec through ``_posixsubprocess.fork_exec``, which raises no audit
    event of its own; replace it so only the audited ``subprocess.Popen`` path is left (and refused)."""
    import _posixsubprocess

    def refused(*args, **kwargs):
        raise PermissionError("sandbox: creating processes is not allowed")

    _posixsubprocess.fork_exec = refused


def make_audit_hook(workdir, read_roots):
    """Built inside a function so the hook is reachable from no module global."""
    workdir = os.path.realpath(workdir)
    read_roots = tuple(os.path.realpath(p) for p in read_roots) + (workdir,)
    write_roots = (workdir,)
    blocked = frozenset((
        "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
        "socket.gethostbyaddr", "socket.sendto", "socket.sendmsg",
        "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen",
        "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill", "os.symlink", "os.link",
        "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function", "ctypes.string_at",
        "ctypes.wstring_at", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.seh_exception",
        "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
        "sys._current_frames", "object.__setattr__", "object.__delattr__", "code.__new__",
        "function.__new__", "sys.remote_exec", "webbrowser.open", "os.chroot", "os.setuid", "os.setgid",
    ))
    changing_events = frozenset((
        "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime",
        "shutil.rmtree", "shutil.copyfile", "shutil.move", "os.chflags", "os.lchown", "os.mknod", "os.mkfifo",
    ))
    listing_events = frozenset(("os.listdir", "os.scandir", "os.chdir", "glob.glob"))
    special_reads = frozenset(("/dev/null", "/dev/urandom", "/dev/random", "/etc/localtime"))

    def inside(path, roots):
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return any(real == root or real.startswith(root + os.sep) for root in roots)

    def refuse(event, detail=""):
        raise PermissionError(f"sandbox: {event} is not allowed" + (f": {detail}" if detail else ""))

    def hook(event, args):
        if event == "import" and args and args[0] in ("_posixsubprocess", "_ctypes", "_multiprocessing"):
            # ImportError, so libraries that use these only when available (numpy's ctypes helpers) still import
            raise ImportError(f"sandbox: importing {args[0]} is not allowed")
        if event in blocked:
            if event in ("object.__setattr__", "object.__delattr__") and not (
                    len(args) > 1 and isinstance(args[0], type(hook)) and args[1] == "__code__"):
                return  # only swapping a function's code is refused (libraries set __module__ etc.)
            refuse(event)
        if event == "ctypes.dlopen" and args and args[0] is not None:
            refuse(event, str(args[0]))
        if event == "open":
            path, mode = args[0], args[1] if len(args) > 1 else "r"
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            if isinstance(path, int):
                return
            writing = any(ch in str(mode or "") for ch in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            if writing:
                if not inside(path, write_roots):
                    refuse("writing " + os.fsdecode(path))
            elif not (inside(path, read_roots) or os.fsdecode(path) in special_reads):
                refuse("reading " + os.fsdecode(path))
        elif event in changing_events or event in listing_events:
            roots = write_roots if event in changing_events else read_roots
            for value in args:
                if isinstance(value, (str, bytes, os.PathLike)) and not inside(value, roots):
                    refuse(event, os.fsdecode(value))

    return hook


def export_images(handle, workdir, skip, suffixes, limit, max_bytes):
    """Copy the images the code saved out of the in-memory work folder into the one host file the
    sandbox may write (``[u32 name length][name][u32 size][bytes]`` records); the parent validates
    every record, so whatever the untrusted code did to this process cannot harm it."""
    import struct

    found = []
    for folder, dirs, files in os.walk(workdir):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, workdir)
            if relative in skip or os.path.splitext(name)[1].lower() not in suffixes or os.path.islink(path):
                continue
            found.append((relative, path))
    for relative, path in found[:limit]:
        try:
            with open(path, "rb") as image:
                data = image.read(max_bytes + 1)
        except OSError:
            continue
        if len(data) > max_bytes:
            continue
        encoded = relative.encode("utf-8", "replace")
        handle.write(struct.pack("<I", len(encoded)) + encoded + struct.pack("<I", len(data)) + data)
    handle.flush()


def main():
    config = json.loads(sys.argv[1])
    layers = list(config.get("layers", []))
    if config.get("require_non_root") and (os.getuid() == 0 or os.geteuid() == 0):
        sys.stderr.write("sandbox: refusing to run: the sandboxed process is root\n")
        sys.exit(2)
    if config.get("no_exec_filter"):
        layers.append(install_filter(config["no_exec_filter"], "no-exec"))
    if config.get("isolate_network", True):
        layers.append(isolate_network())
    elif not layers:
        layers.append("network-not-isolated")
    if config.get("single_process_filter"):  # after unshare, which a process may still do alone
        layers.append(install_filter(config["single_process_filter"], "single-process"))
    apply_limits(config["limits"])
    layers.append("rlimits")
    if config.get("drop_privileges", True):
        layers.append(drop_privileges(config["read_roots"]))
    disable_raw_spawn()
    forget_ctypes()
    os.chdir(config["workdir"])
    with open(config["code_path"], encoding="utf-8") as source:
        code = source.read()
    export = config.get("export")
    # Opened now, before the hook would refuse it; kept open until the images are exported.
    results = open(export["path"], "wb") if export else None  # noqa: SIM115
    sys.addaudithook(make_audit_hook(config["workdir"], config["read_roots"]))
    layers.append("audit-hook")
    report = os.fdopen(int(config["report_fd"]), "w")
    report.write(",".join(layers))  # tells the parent which layers this machine allowed
    report.close()
    workdir = config["workdir"]
    del config
    sys.argv = ["main.py"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(code, "main.py", "exec"), namespace)  # noqa: S102 - this is the sandbox
    except SystemExit as exc:
        raise exc
    except BaseException as exc:  # noqa: BLE001 - report any failure of the user's code
        frames = exc.__traceback__.tb_next if exc.__traceback__ else None  # skip this runner's frame
        traceback.print_exception(type(exc), exc, frames)
        sys.exit(1)
    finally:
        if results is not None:
            try:
                export_images(results, workdir, set(export["skip"]), tuple(export["suffixes"]),
                              int(export["max_images"]), int(export["max_bytes"]))
            except Exception as exc:  # noqa: BLE001 - a failed export loses the images, not the output
                sys.stderr.write(f"sandbox: could not return saved images: {exc}\n")


if __name__ == "__main__":
    main()
