"""``vista env-server`` as users run it: a real subprocess on 127.0.0.1 with a token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
from vista_plugin_envserver.client import RemoteEnv


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_cli_serves_with_token_and_config() -> None:
    port = _free_port()
    command = [sys.executable, "-c", "from vista_rl.cli import main; main()", "env-server",
               "--env", "oddshape/odd-colour-v0", "--port", str(port), "--token", "tok",
               "--set", "grid=4", "--max-sessions", "8", "--client-config", "grid=2..6"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(url + "/health", timeout=1).json()
                break
            except httpx.HTTPError:
                assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.2)
        assert health["envs"] == ["oddshape/odd-colour-v0"] and health["auth"] is True
        assert health["sessions"]["max_sessions"] == 8
        with RemoteEnv(url, token="tok") as env:
            assert "4x4 grid" in env.system_prompt()  # --set reached the env's constructor
            observation, _ = env.reset(seed=2)
            assert observation.images[0].size == (4 * 56, 4 * 56)
        assert httpx.post(url + "/sessions", content=b"", timeout=5).status_code == 401
        assert httpx.get(url + "/openapi.json", timeout=5).status_code == 401
        auth = {"authorization": "Bearer tok"}
        refused = httpx.post(url + "/sessions", json={"config": {"cell_size": 16}}, headers=auth, timeout=5)
        assert refused.status_code == 403 and "cell_size" in refused.json()["error"]  # not on the allow-list
        refused = httpx.post(url + "/sessions", json={"config": {"grid": 9}}, headers=auth, timeout=5)
        assert refused.status_code == 422 and "maximum 6" in refused.json()["error"]
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_cli_rejects_unknown_env_id() -> None:
    completed = subprocess.run([sys.executable, "-c", "from vista_rl.cli import main; main()", "env-server",
                                "--env", "oddshape/odd-color-v0"], capture_output=True, text=True, timeout=60)
    assert completed.returncode != 0
    assert "odd-colour-v0" in completed.stderr  # the error suggests the right id
