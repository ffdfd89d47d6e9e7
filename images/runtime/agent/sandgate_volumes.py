"""The volumes container of a Kubernetes session Pod: the worker moves the session's volumes in and out through it.

A session Pod's volumes are emptyDirs: this container mounts each read-write, the agent's container mounts each as
the session asked (read-only ones read-only, so nothing the session runs can change them, not even the agent). The
worker connects here as it does to the agent (TCP, a hello with the token whose SHA-256 is in
$SANDGATE_AGENT_TOKEN_SHA256), then speaks the file requests of sandgate_files.py, each naming as its `root` one of
the mount paths this container was started with (--root=PATH, once per volume), plus ping.

  python3 -u -I -S sandgate_volumes.py --listen=PORT --root=/mnt/volumes/a [--root=...]

Nothing the session runs reaches this container's files or processes; it could reach the port (the Pod shares one
network namespace), but not without the token, which no container of the Pod holds.
"""
import hashlib
import hmac
import json
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sandgate_files  # noqa: E402

TOKEN_ENV = "SANDGATE_AGENT_TOKEN_SHA256"
HELLO_TIMEOUT_S = 10
MAX_HELLO_BYTES = 4096
SEND_TIMEOUT_S = 30


class Connection:
    """One authenticated client: frames out under a lock, requests served in order."""

    def __init__(self, conn, roots):
        self.conn = conn
        self.roots = roots
        self.lock = threading.Lock()
        self.puts = sandgate_files.Puts()

    def send(self, frame):
        data = (json.dumps(frame, separators=(",", ":")) + "\n").encode("ascii")
        with self.lock:
            self.conn.sendall(data)

    def handle(self, msg):
        op = msg.get("op")
        request_id = msg.get("id") if isinstance(msg.get("id"), str) else None
        if op == "ping":
            self.send({"t": "pong", "id": request_id})
            return
        if op not in ("manifest", "put", "get", "delete"):
            return
        root = msg.get("root")
        if root not in self.roots:
            if op == "manifest":
                self.send({"t": "manifest", "id": request_id, "files": [], "more": False, "truncated": True})
            elif op != "put" or msg.get("last"):
                self.send({"t": "done", "id": request_id, "ok": False, "error": "no volume at %r" % (root,)})
            return
        if op == "manifest":
            sandgate_files.manifest(self.send, request_id, root)
        elif op == "put":
            answer = self.puts.chunk(msg, root)
            if answer is not None:
                self.send(answer)
        elif op == "get":
            sandgate_files.get(self.send, msg, root)
        else:
            sandgate_files.delete(self.send, msg, root)


def serve(conn, token_sha256, roots):
    try:
        conn.settimeout(HELLO_TIMEOUT_S)
        lines = conn.makefile("rb")
        msg = json.loads(lines.readline(MAX_HELLO_BYTES))
        token = msg.get("token") if isinstance(msg, dict) and msg.get("op") == "hello" else None
        if not isinstance(token, str) or not token_sha256:
            raise ValueError("no hello")
        if not hmac.compare_digest(hashlib.sha256(token.encode("utf-8")).hexdigest(), token_sha256):
            raise ValueError("wrong token")
    except (OSError, ValueError):
        conn.close()
        return
    conn.settimeout(None)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, SEND_TIMEOUT_S.to_bytes(8, "little") + bytes(8))
    client = Connection(conn, roots)
    try:
        for line in lines:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict):
                client.handle(msg)
    except OSError:
        pass
    finally:
        for request_id in list(client.puts.open):
            client.puts.close(request_id, unlink=True)
        conn.close()


def main(argv):
    port = None
    roots = set()
    for a in argv:
        if a.startswith("--listen="):
            port = int(a.split("=", 1)[1])
        elif a.startswith("--root="):
            roots.add(a.split("=", 1)[1])
    token_sha256 = os.environ.pop(TOKEN_ENV, "")
    server = socket.create_server(("", port), backlog=4)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn, token_sha256, frozenset(roots)), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1:])
