"""The python sandbox bounds memory per run, all its processes together (issue 22, item 10).

With ``memory_mb=256`` the cap used to be per process: code that called libc ``fork()`` through
``_cffi_backend`` (the audit hook never sees it) 8 times, each child touching 200 MB, reached
1.7 GB. Now a cgroup v2 ``memory.max`` bounds the run where the host delegates one, and otherwise
the run cannot create a process at all; the tool says which applies."""

import re

import pytest
from vista_plugin_tools import isolation, memory_cap

import vista_rl
from vista_rl import ToolContext

MEMORY_MB, DISK_MB = 256, 64

FORK_BOMB = """
import os, threading, time
import _cffi_backend as ffi

thread = threading.Thread(target=lambda: os.write(1, b"thread ran\\n"))  # threads still work
thread.start()
thread.join()
libc = ffi.load_library(None)
fork = libc.load_function(ffi.new_function_type((), ffi.new_primitive_type("int")), "fork")
children = []
for i in range(8):
    pid = fork()
    if pid == 0:                        # a child: touch up to 200 MB, say how much, stay alive a moment
        blocks = []
        try:
            for _ in range(10):
                blocks.append(bytearray(20 * 2**20))   # zero-filled: every page is touched
        except MemoryError:
            pass
        os.write(1, b"child touched %d MB\\n" % (20 * len(blocks)))
        time.sleep(1.0)
        os._exit(0)
    children += [pid] if pid > 0 else []
    os.write(1, b"fork refused\\n" if pid < 0 else b"fork made a child\\n")
for pid in children:                    # keep the sandbox up while the children hold memory
    os.waitpid(pid, 0)
"""


@pytest.fixture(scope="module")
def python_tool():
    why = isolation.problem("bwrap")
    if why is not None:  # scripts/setup.d/sandbox.sh installs bubblewrap; without it this is a real failure
        pytest.fail(f"the namespaces sandbox is unavailable here: {why}")
    return vista_rl.make_tool("python", cpu_seconds=5, wall_seconds=20, memory_mb=MEMORY_MB, disk_mb=DISK_MB)


def run(tool, code):
    return tool({"code": code}, ToolContext(images=[]))


def test_forking_children_that_touch_memory_stays_under_the_run_cap(python_tool):
    pytest.importorskip("_cffi_backend")
    result = run(python_tool, FORK_BOMB)
    cap = result.metadata["memory_cap"]
    assert cap == memory_cap.detect().layer and cap in result.metadata["layers"], result.metadata
    assert "thread ran" in result.text, result.text
    children_mb = sum(int(mb) for mb in re.findall(r"child touched (\\d+) MB", result.text))
    if cap == "single-process":
        assert result.text.count("fork refused") == 8 and children_mb == 0, result.text
    else:  # cgroup v2: children may start, but all of them together stay under memory.max
        peak = result.metadata["peak_memory_bytes"]
        assert peak is not None and peak <= (MEMORY_MB + DISK_MB) * 2**20, result.metadata
        assert children_mb <= MEMORY_MB + DISK_MB, result.text


def test_ctypes_is_not_left_loaded_for_the_code(python_tool):
    """``ctypes.memmove`` raises no audit event when called, so ctypes must not be importable."""
    result = run(python_tool, "import ctypes\nb = ctypes.create_string_buffer(4)\nctypes.memmove(b, b'abcd', 4)\n"
                              "print('memmove ran')")
    assert result.error and "memmove ran" not in result.text
    assert "importing _ctypes is not allowed" in result.text, result.text
    numpy = run(python_tool, "import numpy as np\nprint(int(np.arange(4).sum()))")  # numpy copes without ctypes
    assert not numpy.error and "6" in numpy.text, numpy.text


def test_the_memory_layer_is_said_when_the_tool_is_made(caplog):
    with caplog.at_level("INFO", logger="vista_plugin_tools.python_tool"):
        vista_rl.make_tool("python", memory_mb=MEMORY_MB)
    said = [r.getMessage() for r in caplog.records if "memory of each run is capped" in r.getMessage()]
    assert said and ("cgroup v2" in said[0] or "RLIMIT_AS=256 MB" in said[0]), said


def test_a_host_without_a_delegated_cgroup_falls_back_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv(memory_cap.CGROUP_ENV, str(tmp_path))  # a plain folder, not a cgroup
    memory_cap.detect.cache_clear()
    try:
        cap = memory_cap.detect()
    finally:
        memory_cap.detect.cache_clear()
    assert cap.mode == "single-process" and cap.layer == "single-process"
    assert f"{tmp_path} is not a cgroup v2 folder" in cap.reason
    assert "RLIMIT_AS=256 MB" in cap.describe(256, 64) and "fork/vfork/clone refused" in cap.describe(256, 64)
