"""Run untrusted Python in a separate, limited process (the parent side).

Two isolation modes:

* ``"namespaces"`` (default): the child runs under bubblewrap — its own mount/PID/network/IPC/UTS
  namespaces with a read-only view of only the Python installation and system libraries, one
  private writable folder, the nobody user, and a seccomp filter (:mod:`vista_plugin_tools.isolation`).
  Native code the model writes (an extension module, SQLite or OpenCV writing files) is bounded by
  the kernel, not by Python.  When the host cannot give this, :func:`run_python` refuses with
  :class:`~vista_plugin_tools.isolation.IsolationUnavailable` saying why.
* ``"process"`` (explicit opt-in): the old, weaker layers only — a separate process, a private
  network namespace where the kernel allows it, the nobody user when root.  Native code is NOT
  contained in this mode.

In both, the child side (``_sandbox_runner.py``) adds CPU/memory/file-size/process rlimits and a
PEP 578 audit hook refusing sockets, process creation and file access outside its folder, and the
parent enforces a wall-clock timeout that kills the whole process group.  Memory is capped per run, all its
processes together (:mod:`vista_plugin_tools.memory_cap`): a cgroup v2 ``memory.max`` where the host
delegates one, otherwise no process creation at all (seccomp) under RLIMIT_AS.
``SandboxResult.layers`` says which layers applied on this machine.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from vista_plugin_tools import isolation, memory_cap
from vista_plugin_tools.seccomp_filter import filter_fd, no_exec_filter, sandbox_filter, single_process_filter

ISOLATION_MODES = ("namespaces", "process")
RUNNER = Path(__file__).with_name("_sandbox_runner.py")
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp"}
NOBODY = 65534


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = 10
    wall_seconds: float = 20.0
    memory_mb: int = 1024
    output_bytes: int = 1_000_000  # per stream; also the cap on any single file the code writes
    file_mb: int = 16
    processes: int = 32
    open_files: int = 256
    max_images: int = 4
    max_image_pixels: int = 4096 * 4096
    disk_mb: int = 64  # namespaces mode: size of the in-memory work folder (its disk quota)


@dataclass
class SandboxResult:
    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    cpu_limited: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    images: list[Image.Image] = field(default_factory=list)
    image_names: list[str] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)
    seconds: float = 0.0
    failed_to_start: bool = False  # the sandbox itself (bwrap) failed; stderr says why
    memory_cap: str = ""  # the per-run memory layer: "cgroup-v2(...)" or "single-process"
    peak_memory_bytes: int | None = None  # cgroup-v2 only: the run's peak, all processes together
    oom_killed: bool = False  # cgroup-v2 only: the kernel stopped the run at memory.max

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def read_roots() -> list[str]:
    """Where sandboxed code may read: the Python installation (stdlib and site-packages)."""
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.add(os.path.join(sys.base_prefix, "lib"))
    roots.update(p for p in ("/usr/share/fonts", "/usr/share/zoneinfo") if os.path.isdir(p))
    return sorted(roots)


def _read_capped(path: Path, limit: int) -> tuple[str, bool]:
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


def _child_env(workdir: Path | str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{workdir}/.matplotlib",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
    }


def _seed_matplotlib_cache(target: Path) -> None:
    """Copy the host's matplotlib font list so each run skips the font scan (a second or more)."""
    candidates = [Path(os.environ.get("MPLCONFIGDIR", "")), Path.home() / ".cache" / "matplotlib"]
    for folder in candidates:
        if folder.is_dir():
            for cached in folder.glob("fontlist-*.json"):
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy(cached, target / cached.name)
                return


def _open_image(source: Path | io.BytesIO, limits: SandboxLimits) -> Image.Image | None:
    try:
        with Image.open(source) as opened:
            if opened.width * opened.height > limits.max_image_pixels:
                return None
            return opened.convert("RGB")
    except Exception:  # noqa: BLE001 - a broken file the code wrote is not an image
        return None


def _collect_images(workdir: Path, skip: set[str], limits: SandboxLimits) -> tuple[list[Image.Image], list[str]]:
    """Process mode: the images the code saved, read from its host folder."""
    images: list[Image.Image] = []
    names: list[str] = []
    for path in sorted(workdir.rglob("*")):
        if len(images) >= limits.max_images:
            break
        if path.suffix.lower() not in IMAGE_SUFFIXES or path.name in skip or path.is_symlink() or not path.is_file():
            continue
        if (image := _open_image(path, limits)) is not None:
            images.append(image)
            names.append(str(path.relative_to(workdir)))
    return images, names


def _read_exported(path: Path, limits: SandboxLimits) -> tuple[list[Image.Image], list[str]]:
    """Namespaces mode: parse the runner's image records; every length is bounds-checked, since the
    untrusted code could have written anything into this file."""
    data = path.read_bytes()[: limits.file_mb * 2**20]
    images: list[Image.Image] = []
    names: list[str] = []
    offset = 0
    while offset + 4 <= len(data) and len(images) < limits.max_images:
        (name_length,) = struct.unpack_from("<I", data, offset)
        offset += 4
        if name_length > 4096 or offset + name_length + 4 > len(data):
            break
        name = data[offset:offset + name_length].decode("utf-8", "replace")
        offset += name_length
        (size,) = struct.unpack_from("<I", data, offset)
        offset += 4
        if offset + size > len(data):
            break
        image = _open_image(io.BytesIO(data[offset:offset + size]), limits)
        offset += size
        if image is not None:
            images.append(image)
            names.append(name)
    return images, names


@dataclass
class _Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    fds: list[int] = field(default_factory=list)  # passed to the child, closed by the parent after start


def _rlimits(limits: SandboxLimits) -> dict[str, int]:
    return {
        "cpu_seconds": limits.cpu_seconds, "memory_bytes": limits.memory_mb * 2**20,
        "file_bytes": limits.file_mb * 2**20,  # stdout/stderr are files too
        "open_files": limits.open_files, "processes": limits.processes,
    }


def _memory_config(cap: memory_cap.MemoryCap) -> dict[str, str]:
    """Runner config for the per-run memory layer: without a cgroup, the run may not fork."""
    return {} if cap.mode == "cgroup-v2" else {"single_process_filter": single_process_filter().hex()}


def _process_launch(root: Path, workdir: Path, limits: SandboxLimits, isolate_network: bool,
                    report_fd: int, cap: memory_cap.MemoryCap) -> _Launch:
    config = {"workdir": str(workdir), "code_path": str(root / "main.py"), "read_roots": read_roots(),
              "isolate_network": isolate_network, "drop_privileges": True, "report_fd": report_fd,
              "limits": _rlimits(limits), **_memory_config(cap)}
    return _Launch([sys.executable, "-I", "-B", str(RUNNER), json.dumps(config)], _child_env(workdir), workdir)


def _namespaces_launch(root: Path, staged: Path, limits: SandboxLimits, report_fd: int, bwrap: str,
                       inputs: set[str], cap: memory_cap.MemoryCap) -> _Launch:
    """bwrap command whose work folder is a size-capped tmpfs (a disk quota: native code cannot fill
    the host's disk), seeded from ``staged`` through bwrap ``--file`` copies."""
    fds = [filter_fd(sandbox_filter())]
    extra = ["--perms", "0777", "--size", str(limits.disk_mb * 2**20), "--tmpfs", isolation.WORKDIR]
    try:
        for path in sorted(staged.rglob("*")):
            target = f"{isolation.WORKDIR}/{path.relative_to(staged)}"
            if path.is_dir():
                extra += ["--perms", "0777", "--dir", target]
            elif path.is_file():
                fds.append(os.open(path, os.O_RDONLY))
                extra += ["--perms", "0666", "--file", str(fds[-1]), target]
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    (root / "result.bin").touch()
    if os.geteuid() == 0:
        os.chown(root / "result.bin", NOBODY, NOBODY)
    config = {"workdir": isolation.WORKDIR, "code_path": isolation.CODE_PATH, "read_roots": read_roots(),
              "isolate_network": False, "drop_privileges": False, "report_fd": report_fd,
              "limits": _rlimits(limits), "layers": [*isolation.describe_layers(), f"tmpfs-{limits.disk_mb}mb"],
              "require_non_root": True, "no_exec_filter": no_exec_filter().hex(), **_memory_config(cap),
              "export": {"path": isolation.EXPORT_PATH, "skip": sorted(inputs), "suffixes": sorted(IMAGE_SUFFIXES),
                         "max_images": limits.max_images, "max_bytes": limits.file_mb * 2**20}}
    binds = [(str(root / "main.py"), isolation.CODE_PATH, False), (str(RUNNER), isolation.RUNNER_PATH, False),
             (str(root / "result.bin"), isolation.EXPORT_PATH, True)]
    try:
        argv = isolation.bwrap_command(bwrap, binds, fds[0], ["-I", "-B", isolation.RUNNER_PATH, json.dumps(config)],
                                       extra=extra)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return _Launch(argv, _child_env(isolation.WORKDIR), root, fds)


def _exit_code(raw: int, mode: str) -> int:
    """bwrap reports a child killed by signal N as exit status 128+N; give it back as -N like Popen."""
    if mode == "namespaces" and raw > 128 and raw - 128 in (signal.SIGXCPU, signal.SIGKILL, signal.SIGSEGV,
                                                              signal.SIGABRT, signal.SIGBUS, signal.SIGXFSZ):
        return -(raw - 128)
    return raw


def run_python(code: str, limits: SandboxLimits | None = None, inputs: dict[str, Image.Image] | None = None,
               isolate_network: bool = True, isolation_mode: str = "namespaces",
               bwrap: str = "bwrap") -> SandboxResult:
    """Run ``code`` in a fresh sandbox; ``inputs`` are saved into its working directory first.

    Raises :class:`~vista_plugin_tools.isolation.IsolationUnavailable` in ``"namespaces"`` mode when
    the host cannot give that isolation (the message says why and how to fix or opt out)."""
    if isolation_mode not in ISOLATION_MODES:
        raise ValueError(f"isolation must be one of {ISOLATION_MODES}, not {isolation_mode!r}")
    if isolation_mode == "namespaces":
        why = isolation.problem(bwrap)
        if why is not None:
            raise isolation.IsolationUnavailable(why)
    limits = limits or SandboxLimits()
    cap = memory_cap.detect()
    root = Path(tempfile.mkdtemp(prefix="vista-sandbox-"))
    workdir = root / "work"  # process mode: the work folder itself; namespaces mode: what seeds the tmpfs
    workdir.mkdir()
    launch: _Launch | None = None
    cgroup: memory_cap.RunCgroup | None = None
    try:
        for name, image in (inputs or {}).items():
            image.save(workdir / name)
        _seed_matplotlib_cache(workdir / ".matplotlib")
        (root / "main.py").write_text(code, encoding="utf-8")
        if os.geteuid() == 0:  # the child becomes nobody; it must own its working directory and nothing else
            for path in [workdir, *workdir.rglob("*")]:
                os.chown(path, NOBODY, NOBODY)
            os.chmod(root, 0o711)
        if cap.mode == "cgroup-v2" and cap.parent is not None:
            try:
                cgroup = memory_cap.RunCgroup(cap.parent, (limits.memory_mb + limits.disk_mb) * 2**20,
                                              limits.processes)
            except OSError as exc:  # the delegated cgroup went away or filled up: run nothing uncapped
                raise isolation.IsolationUnavailable(
                    f"cannot create this run's cgroup under {cap.parent} ({exc}), so its memory cannot be "
                    "capped; the code was not run") from None
        report_read, report_write = os.pipe()
        if isolation_mode == "namespaces":
            launch = _namespaces_launch(root, workdir, limits, report_write, bwrap, set(inputs or {}), cap)
        else:
            launch = _process_launch(root, workdir, limits, isolate_network, report_write, cap)
        argv = launch.argv if cgroup is None else cgroup.launcher(launch.argv)
        out_path, err_path = root / "stdout.txt", root / "stderr.txt"
        start = time.monotonic()
        timed_out = False
        with out_path.open("wb") as out, err_path.open("wb") as err:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=launch.cwd, env=launch.env,
                start_new_session=True, pass_fds=(report_write, *launch.fds), close_fds=True,
            )
            os.close(report_write)
            try:
                exit_code: int | None = process.wait(timeout=limits.wall_seconds)
            except subprocess.TimeoutExpired:
                timed_out, exit_code = True, None
            finally:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)  # whatever it left running dies with it
                process.wait()
        with os.fdopen(report_read, "r") as report:
            layers = [layer for layer in report.read().split(",") if layer]
        peak, oom_killed = None, False
        if cgroup is not None:
            peak, oom_killed = cgroup.peak_bytes(), cgroup.oom_kills() > 0
            if layers:
                layers.append(cap.layer)
        if exit_code is not None:
            exit_code = _exit_code(exit_code, isolation_mode)
        stdout, stdout_cut = _read_capped(out_path, limits.output_bytes)
        stderr, stderr_cut = _read_capped(err_path, limits.output_bytes)
        cpu_limited = exit_code == -signal.SIGXCPU or (exit_code == -signal.SIGKILL and not timed_out)
        if isolation_mode == "namespaces":
            images, names = _read_exported(root / "result.bin", limits)
        else:
            images, names = _collect_images(workdir, set(inputs or {}), limits)
        return SandboxResult(stdout, stderr, exit_code, timed_out, cpu_limited, stdout_cut, stderr_cut,
                             images, names, layers, time.monotonic() - start,
                             failed_to_start=not layers and not timed_out, memory_cap=cap.layer,
                             peak_memory_bytes=peak, oom_killed=oom_killed)
    finally:
        for fd in launch.fds if launch else ():
            os.close(fd)
        if cgroup is not None:
            cgroup.close()
        shutil.rmtree(root, ignore_errors=True)
