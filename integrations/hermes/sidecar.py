"""The `ctxhost serve` child and a JSON-RPC 2.0 client for it (one JSON object per line over the
child's stdin/stdout, docs/serve-protocol.md).

- Started lazily by the first call; `initialize` is the first request of every child.
- One child per CTXHOST_HOME per Hermes process, kept in a module-level registry: Hermes
  deep-copies a plugin's engine, and a process handle (its pipes hold locks) cannot be copied,
  so the engine holds only the registry key.
- Every call has a deadline. A child that lets one pass is taken as wedged and killed (requests
  of one session run in order on the server, so everything behind it would wait too); the next
  call starts a new one. A child that exits on its own is restarted by the next call after a
  backoff that doubles with each consecutive failure (0.1 s ... 5 s).
- When Hermes exits, the child's stdin is closed and `ctxhost serve` exits on EOF (it finishes
  what it has and never leaves a half-written transcript).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

PROTOCOL_VERSION = 1
DEFAULT_CALL_TIMEOUT_S = 30.0
_BACKOFF_BASE_S = 0.1
_BACKOFF_MAX_S = 5.0

# JSON-RPC error codes of the protocol that the bridge acts on.
INVALID_PARAMS = -32602
UNKNOWN_SESSION = -32001


class RpcError(Exception):
    """An error the server answered (a JSON-RPC error object)."""

    def __init__(self, method: str, error: Dict[str, Any]):
        self.method = method
        self.code = error.get("code")
        self.data = error.get("data")
        self.detail = str(error.get("message", ""))
        super().__init__(f"ctxhost serve: {method}: {self.detail} (code {self.code})")


class SidecarError(Exception):
    """No answer can come: the child could not start, exited, or let a call time out."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


def _warn(message: str) -> None:
    sys.stderr.write(f"ctxhost: {message}\n")
    sys.stderr.flush()


class Sidecar:
    """One `ctxhost serve` child. Calls are serialized by a lock (Hermes calls its engine from
    one thread, but a gateway may not)."""

    def __init__(
        self,
        binary: str,
        home: str,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        client: Optional[Dict[str, str]] = None,
        warn: Callable[[str], None] = _warn,
        args: Tuple[str, ...] = ("serve",),
    ):
        self.binary = binary
        self.home = home
        self.call_timeout_s = call_timeout_s
        self.client = client or {"name": "hermes-ctxhost"}
        self.args = args
        self._warn = warn
        self._lock = threading.RLock()
        self._proc: Optional[subprocess.Popen] = None
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self._next_id = 0
        self._failures = 0
        self._next_spawn_at = 0.0
        self._closed = False
        self.initialized: Optional[Dict[str, Any]] = None
        self.generation = 0
        # Time spent in calls (seconds) and their count, for the bridge's timing summary.
        self.call_seconds = 0.0
        self.calls = 0
        self.spawn_seconds: Optional[float] = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc else None

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, timeout_s: Optional[float] = None) -> Any:
        """Sends one request and returns its result; raises RpcError for an error answer and
        SidecarError when no answer can come."""
        with self._lock:
            if self._closed:
                raise SidecarError("closed", "ctxhost serve: the client is shut down")
            timeout = self.call_timeout_s if timeout_s is None else timeout_s
            deadline = time.monotonic() + timeout
            self._ensure_started(deadline)
            started = time.monotonic()
            try:
                result = self._send(method, params or {}, deadline, timeout)
            finally:
                self.call_seconds += time.monotonic() - started
                self.calls += 1
            self._failures = 0
            return result

    def start(self) -> Dict[str, Any]:
        """Starts the child unless it runs; returns its `initialize` answer (engine, window)."""
        with self._lock:
            if self._closed:
                raise SidecarError("closed", "ctxhost serve: the client is shut down")
            self._ensure_started(time.monotonic() + self.call_timeout_s)
            assert self.initialized is not None
            return self.initialized

    def shutdown(self, grace_s: float = 2.0) -> None:
        """Closes the child's stdin (it exits on EOF) and waits up to grace_s, then kills it."""
        with self._lock:
            self._closed = True
            proc = self._proc
            self._proc = None
            if proc is None:
                return
            try:
                if proc.stdin:
                    proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def kill(self) -> None:
        """Kills the child (tests use it to simulate a crash)."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()

    # --- internals -------------------------------------------------------------------------

    def _backoff_s(self) -> float:
        if self._failures == 0:
            return 0.0
        return min(_BACKOFF_MAX_S, _BACKOFF_BASE_S * 2 ** (self._failures - 1))

    def _ensure_started(self, deadline: float) -> None:
        if self.running and self.initialized is not None:
            return
        if self._proc is not None:
            # It exited since the last call: its sessions are gone with it.
            code = self._proc.poll()
            self._gone(f"exited with code {code}")
        wait = self._next_spawn_at - time.monotonic()
        if wait > 0:
            # A short backoff (a crash just now) is waited out; during a long one calls fail at
            # once instead of stalling Hermes' turn.
            if wait > 1.0 or time.monotonic() + wait > deadline:
                raise SidecarError(
                    "spawn",
                    f"ctxhost serve: restarting after {self._failures} failure(s); next attempt in {wait:.1f} s",
                )
            time.sleep(wait)
        env = dict(os.environ)
        env["CTXHOST_HOME"] = self.home
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                [self.binary, *self.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                close_fds=True,
            )
        except OSError as err:
            self._failed_start()
            raise SidecarError("spawn", f"ctxhost serve: could not run `{self.binary}`: {err.strerror or err}") from err
        self._proc = proc
        self.generation += 1
        self._lines = queue.Queue()
        threading.Thread(target=self._read_stdout, args=(proc, self._lines), daemon=True, name="ctxhost-stdout").start()
        threading.Thread(target=self._read_stderr, args=(proc,), daemon=True, name="ctxhost-stderr").start()
        try:
            answer = self._send(
                "initialize",
                {"protocolVersion": PROTOCOL_VERSION, "client": self.client},
                deadline,
                deadline - started,
            )
            if not isinstance(answer, dict) or answer.get("protocolVersion") != PROTOCOL_VERSION:
                version = answer.get("protocolVersion") if isinstance(answer, dict) else None
                raise SidecarError(
                    "spawn",
                    f"ctxhost serve ({self.binary}) speaks protocol version {json.dumps(version)}, this bridge "
                    f"speaks {PROTOCOL_VERSION}: use a ctxhost binary and a bridge of the same release",
                )
        except BaseException:
            if self._proc is proc:
                self._proc = None
                proc.kill()
                proc.wait()
            self._failed_start()
            raise
        self.initialized = answer
        self.spawn_seconds = time.monotonic() - started

    def _failed_start(self) -> None:
        self._failures += 1
        self._next_spawn_at = time.monotonic() + self._backoff_s()

    def _gone(self, why: str) -> None:
        proc = self._proc
        self._proc = None
        self.initialized = None
        if proc is not None and not self._closed:
            self._failed_start()
            self._warn(f"ctxhost serve (pid {proc.pid}) {why}; the next call restarts it")

    def _send(self, method: str, params: Dict[str, Any], deadline: float, nominal_s: float) -> Any:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise SidecarError("exited", "ctxhost serve is not running")
        self._next_id += 1
        request_id = self._next_id
        # Compact, as JSON.stringify writes it: the server keeps a message's JSON byte for byte,
        # and what ctx_search quotes of it (a tool call's arguments) must read the same whichever
        # agent wrote it.
        line = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        try:
            proc.stdin.write(line.encode("utf-8") + b"\n")
            proc.stdin.flush()
        except OSError as err:
            self._gone(f"closed its stdin ({err})")
            raise SidecarError("exited", f"ctxhost serve exited before {method} could be sent") from err
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._wedged(proc, method, nominal_s)
                raise SidecarError("timeout", f"ctxhost serve: {method} got no answer within {nominal_s:.1f} s")
            try:
                raw = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if raw is None:
                code = proc.wait()
                self._gone(f"exited with code {code}")
                raise SidecarError("exited", f"ctxhost serve exited with code {code} during {method}")
            try:
                message = json.loads(raw)
            except ValueError:
                self._warn(f"ctxhost serve wrote a line that is not JSON: {raw[:200]}")
                continue
            if isinstance(message, dict) and "method" in message and "id" not in message:
                self._notification(message.get("method"), message.get("params") or {})
                continue
            if not isinstance(message, dict) or message.get("id") != request_id:
                # An answer to a call that timed out earlier cannot arrive: that child was killed.
                self._warn(f"ctxhost serve answered an unknown request id {json.dumps(message.get('id') if isinstance(message, dict) else None)}")
                continue
            if message.get("error") is not None:
                raise RpcError(method, message["error"])
            return message.get("result")

    def _notification(self, method: Any, params: Dict[str, Any]) -> None:
        if method == "session.compactionPending":
            text = params.get("message") or f"automatic compaction of session {params.get('sessionKey', '?')} is about to run"
            self._warn(str(text))

    def _wedged(self, proc: subprocess.Popen, method: str, nominal_s: float) -> None:
        if self._proc is not proc:
            return
        self._warn(
            f"ctxhost serve (pid {proc.pid}) did not answer {method} within {nominal_s:.1f} s; killing it, the next call starts a new one"
        )
        self._proc = None
        self.initialized = None
        self._failed_start()
        proc.kill()
        proc.wait()

    @staticmethod
    def _read_stdout(proc: subprocess.Popen, lines: "queue.Queue[Optional[str]]") -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            text = raw.decode("utf-8", errors="replace").strip()
            if text:
                lines.put(text)
        lines.put(None)

    @staticmethod
    def _read_stderr(proc: subprocess.Popen) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            text = raw.decode("utf-8", errors="replace").rstrip()
            if text:
                sys.stderr.write(f"[ctxhost serve {proc.pid}] {text}\n")


# One sidecar per CTXHOST_HOME for this process, outside any engine object: `ctxhost serve`
# allows one server per home (serve.lock), so a second engine naming another binary or timeout for
# the same home shares the first one's server instead of starting one that would be refused.
_SIDECARS: Dict[str, Sidecar] = {}
_REGISTRY_LOCK = threading.Lock()


def sidecar_for(binary: str, home: str, call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> Sidecar:
    with _REGISTRY_LOCK:
        sidecar = _SIDECARS.get(home)
        if sidecar is None:
            sidecar = Sidecar(binary, home, call_timeout_s)
            _SIDECARS[home] = sidecar
        elif sidecar.binary != binary:
            _warn(f"{binary} is asked for CTXHOST_HOME {home}, which {sidecar.binary} already serves in this process; using that one")
        return sidecar


def shutdown_all() -> None:
    """Ends every sidecar of this process (at exit: the server then flushes and exits)."""
    with _REGISTRY_LOCK:
        sidecars = list(_SIDECARS.values())
        _SIDECARS.clear()
    for sidecar in sidecars:
        try:
            sidecar.shutdown()
        except Exception as err:  # noqa: BLE001 - exiting anyway; say what failed
            _warn(f"stopping ctxhost serve failed: {err}")


atexit.register(shutdown_all)
