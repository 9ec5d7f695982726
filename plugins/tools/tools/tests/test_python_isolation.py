"""The python tool's OS-level sandbox (issue 13): escapes that Python's audit hook cannot see —
native code, SQLite's and OpenCV's own file I/O, ``os.stat`` — must be contained by the kernel, and
a host without the isolation must refuse unless the user opts in to the weaker mode."""

import base64
import os
import re
import shutil
import subprocess
import sys
import uuid
import zlib
from pathlib import Path

import pytest
from vista_plugin_tools import isolation

import vista_rl
from vista_rl import ConfigError, ToolContext

REPO = Path(__file__).resolve().parents[4]
#: A repo file the interpreter never needs.  Not the repo dir itself: when the venv lives inside the
#: checkout (.venv), bwrap creates the venv's parent dirs as empty mount points, so the repo *dir*
#: exists inside while none of its files do.
REPO_FILE = REPO / "pyproject.toml"
PROBE_SOURCE = Path(__file__).with_name("native") / "escape_probe.c"


@pytest.fixture(scope="module")
def python_tool():
    why = isolation.problem("bwrap")
    if why is not None:  # scripts/setup.d/sandbox.sh installs bubblewrap; without it this is a real failure
        pytest.fail(f"the namespaces sandbox is unavailable here: {why}")
    return vista_rl.make_tool("python", cpu_seconds=4, wall_seconds=15, memory_mb=768)


def run(tool, code):
    return tool({"code": code}, ToolContext(images=[]))


def host_path(tag: str) -> Path:
    """A host path under /tmp that sandboxed code will try to create (unique per test run)."""
    return Path("/tmp") / f"vista-escape-{tag}-{uuid.uuid4().hex[:8]}"


def test_default_layers_are_the_os_level_ones(python_tool):
    result = run(python_tool, "print('hi')")
    assert not result.error, result.text
    layers = result.metadata["layers"]
    assert result.metadata["isolation"] == "namespaces"
    for layer in ("namespaces(mount+pid+net+ipc+uts)", "seccomp", "no-exec", "rlimits", "audit-hook"):
        assert layer in layers, layers
    assert any(layer.startswith("uid-65534") for layer in layers), layers


@pytest.fixture(scope="module")
def native_probe(python_tool, tmp_path_factory):
    """Build the hostile extension with the system C compiler, then let sandboxed code write and import it."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (gcc/cc) on this machine to build the native escape probe")
    build = tmp_path_factory.mktemp("probe")
    marker = build / "pwned.txt"
    library = build / "probe.so"
    defines = [f'-DMARKER="{marker}"', f'-DREPO="{REPO_FILE}"', f'-DPYTHON="{os.path.realpath(sys.executable)}"']
    subprocess.run([compiler, "-shared", "-fPIC", "-Os", "-s", *defines, "-o", str(library), str(PROBE_SOURCE)],
                   check=True, capture_output=True)
    payload = base64.b64encode(zlib.compress(library.read_bytes(), 9)).decode()  # fits the 20k-char code cap
    code = ("import base64, importlib.machinery, importlib.util, zlib\n"
            f"open('probe.so', 'wb').write(zlib.decompress(base64.b64decode('{payload}')))\n"
            "loader = importlib.machinery.ExtensionFileLoader('probe', 'probe.so')\n"
            "spec = importlib.util.spec_from_file_location('probe', 'probe.so', loader=loader)\n"
            "importlib.util.module_from_spec(spec)\n")
    result = run(python_tool, code)
    probes = dict(re.findall(r"^(\w+)[=:][ \t]*(.*)$", result.text, flags=re.MULTILINE))
    assert "uid" in probes, f"the probe's constructor did not run: {result.text}"
    return probes, marker, result


def test_native_constructor_runs_as_nobody_and_cannot_run_a_shell(native_probe):
    probes, marker, _ = native_probe
    assert probes["uid"].startswith("65534 euid=65534 gid=65534"), probes["uid"]
    assert probes["system"] != "0"  # no shell to run, and execve is refused
    assert not marker.exists(), "the native constructor wrote to the host"
    assert probes["write_marker"] != "ok" and probes["write_tmp"] != "ok"
    assert not Path("/tmp/vista-native-escape.txt").exists()


def test_native_code_cannot_see_host_files(native_probe):
    probes, _, _ = native_probe
    assert probes["stat_shadow"] == "No such file or directory"
    assert probes["stat_repo"] == "No such file or directory"


def test_native_code_has_no_network(native_probe):
    probes, _, _ = native_probe
    assert probes["socket_inet"] == "Address family not supported by protocol"  # seccomp
    assert probes["socket_inet6"] == "Address family not supported by protocol"
    assert probes["socket_unix"] == "ok"  # AF_UNIX stays (Python needs socketpair-style IPC)
    assert probes["interfaces"].split() == ["lo"]  # a private network namespace: loopback only


@pytest.mark.parametrize("syscall", ["ptrace", "unshare_user", "unshare_net", "mount", "keyctl", "bpf", "execve"])
def test_forbidden_syscalls_fail(native_probe, syscall):
    probes, _, _ = native_probe
    assert probes[syscall] == "Operation not permitted", f"{syscall}: {probes[syscall]}"


def test_native_code_sees_its_own_pid_namespace_without_privileges(native_probe):
    probes, _, _ = native_probe
    assert int(probes["pids"]) <= 4, probes["pids"]  # bwrap's init, the runner; no host processes
    assert probes["kill_pid1"] == "Operation not permitted"
    assert probes["Seccomp"] == "2" and probes["NoNewPrivs"] == "1"
    assert int(probes["CapEff"], 16) == 0


def test_sqlite_cannot_write_outside_the_work_dir(python_tool):
    target = host_path("sqlite")
    result = run(python_tool, f"import sqlite3\ndb = sqlite3.connect('{target}.db')\n"
                              "db.execute('create table t (x)')\ndb.commit()\nprint('written')")
    assert result.error and "written" not in result.text, result.text
    assert "unable to open database file" in result.text
    assert not Path(f"{target}.db").exists()


def test_sqlite_works_inside_the_work_dir(python_tool):
    result = run(python_tool, "import sqlite3\ndb = sqlite3.connect('inside.db')\n"
                              "db.execute('create table t (x)')\ndb.execute('insert into t values (7)')\n"
                              "print(db.execute('select x from t').fetchone()[0])")
    assert not result.error and "7" in result.text, result.text


def test_cv2_imwrite_cannot_write_outside_the_work_dir(python_tool):
    target = host_path("cv2")
    result = run(python_tool, "import cv2, numpy as np\nimage = np.zeros((8, 8, 3), np.uint8)\n"
                              f"print('outside', cv2.imwrite('{target}.png', image))\n"
                              "print('inside', cv2.imwrite('inside.png', image))")
    assert not Path(f"{target}.png").exists()
    assert "outside True" not in result.text, result.text
    assert "inside True" in result.text and len(result.images) == 1


@pytest.mark.parametrize("path", ["/etc/shadow", "/etc/passwd", str(REPO_FILE), __file__, "/tmp", "/var"])
def test_os_stat_does_not_see_host_paths(python_tool, path):
    venv = Path(sys.prefix).resolve()
    if Path(path) in venv.parents:
        # A checkout under /tmp: bwrap creates the venv's parent dirs as empty mount points, so this
        # dir exists inside, but the host's files in it do not.
        host_file = Path(path) / f"vista-host-{uuid.uuid4().hex}"
        host_file.write_text("host")
        try:
            result = run(python_tool, f"import os\nprint('exists', os.path.exists({str(host_file)!r}))")
        finally:
            host_file.unlink()
        assert "exists False" in result.text, result.text
        return
    result = run(python_tool, f"import os\nprint('exists', os.path.exists({path!r}))\nos.stat({path!r})")
    assert "exists False" in result.text and "FileNotFoundError" in result.text, result.text


def test_root_filesystem_is_read_only(python_tool):
    result = run(python_tool, "import os\nfd = os.open('/escape.txt', os.O_WRONLY | os.O_CREAT)")
    assert result.error and ("Read-only file system" in result.text or "not allowed" in result.text), result.text


def test_uid_inside_is_not_root(python_tool):
    result = run(python_tool, "import os\nprint(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())")
    assert "65534 65534 65534 []" in result.text, result.text


def test_file_size_limit_is_a_clear_error(python_tool):
    result = run(python_tool, "open('big.bin', 'wb').write(b'x' * (64 * 2**20))")
    assert result.error and "File too large" in result.text, result.text


def test_work_dir_is_a_size_capped_tmpfs_so_the_host_disk_cannot_fill(python_tool):
    result = run(python_tool, "for i in range(20):\n    open(f'chunk{i}.bin', 'wb').write(b'x' * (8 * 2**20))")
    assert result.error and "No space left on device" in result.text, result.text  # 64 MB default quota
    assert any(layer.startswith("tmpfs-") for layer in result.metadata["layers"])


def test_open_files_limit_is_a_clear_error(python_tool):
    result = run(python_tool, "handles = [open(f'f{i}.txt', 'w') for i in range(1000)]")
    assert result.error and "Too many open files" in result.text, result.text


def test_native_memory_blow_up_is_a_clear_error(python_tool):
    result = run(python_tool, "import numpy as np\nnp.ones((40_000, 40_000))")
    assert result.error and "Unable to allocate" in result.text, result.text


def test_missing_bubblewrap_refuses_with_the_reason():
    tool = vista_rl.make_tool("python", bwrap_path="/nonexistent/bwrap")
    result = run(tool, "print('ran')")
    assert result.error and "ran" not in result.text.replace("not run", "")
    assert "the sandbox is unavailable" in result.text and "/nonexistent/bwrap" in result.text
    assert 'isolation="process"' in result.text and "bubblewrap" in result.text
    assert result.metadata["refused"]


def test_bubblewrap_that_cannot_make_namespaces_refuses():
    """``false`` stands in for a bwrap the host forbids (it exits 1 like bwrap does without namespaces)."""
    tool = vista_rl.make_tool("python", bwrap_path=shutil.which("false"))
    result = run(tool, "print('ran')")
    assert result.error and "cannot create the sandbox on this host" in result.text, result.text


def test_weak_mode_runs_only_with_the_explicit_opt_in():
    tool = vista_rl.make_tool("python", bwrap_path="/nonexistent/bwrap", isolation="process")
    result = run(tool, "print('ran', 6 * 7)")
    assert not result.error and "ran 42" in result.text, result.text
    assert result.metadata["isolation"] == "process"
    assert not any(layer.startswith("namespaces") for layer in result.metadata["layers"])
    assert "audit-hook" in result.metadata["layers"]


def test_unknown_isolation_mode_is_a_config_error():
    with pytest.raises(ConfigError, match="isolation must be one of namespaces, process"):
        vista_rl.make_tool("python", isolation="none")
