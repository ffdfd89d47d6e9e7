"""The sandbox's way out, when its tenant has egress: a relay from the HTTP proxy port on loopback to the worker's
egress proxy, a Unix socket mounted into this sandbox only. The sandbox has no network interface but loopback, so
this is its only route anywhere, and the worker decides every request (the tenant's allow-list, the session's
private flag). The agent starts it before anything else runs, and every program finds it through HTTP_PROXY and
HTTPS_PROXY.

One thread relays every connection (a thread each would count against the sandbox's process limit).
"""
import selectors
import socket
import threading

ENV = "SANDGATE_EGRESS_SOCKET"
PORT = 3128
SEND_TIMEOUT_S = 30
UNREACHABLE = (b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n"
               b"sandgate: the egress proxy is not reachable\n")


def proxy_env():
    """What programs need to find the proxy: curl, pip, requests, urllib and npm read these."""
    url = f"http://127.0.0.1:{PORT}"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    local = "localhost,127.0.0.1,::1"
    env.update(NO_PROXY=local, no_proxy=local, NODE_USE_ENV_PROXY="1")
    return env


def start(path):
    """Listens on 127.0.0.1:PORT and relays each connection to the proxy socket at `path`, in a daemon thread."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", PORT))
    server.listen(64)
    threading.Thread(target=Relay(server, path).serve, name="sandgate-egress", daemon=True).start()


class Relay:
    def __init__(self, server, path):
        self.server = server
        self.path = path
        self.selector = selectors.DefaultSelector()
        self.peer = {}
        # Sockets that have sent their last byte: a pair is closed once both have.
        self.ended = set()

    def serve(self):
        self.selector.register(self.server, selectors.EVENT_READ)
        while True:
            for key, _ in self.selector.select():
                if key.fileobj is self.server:
                    self.accept()
                else:
                    self.forward(key.fileobj)

    def accept(self):
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX)
        try:
            upstream.connect(self.path)
        except OSError:
            upstream.close()
            try:
                conn.sendall(UNREACHABLE)
            finally:
                conn.close()
            return
        self.pair(conn, upstream)

    def pair(self, a, b):
        """Relays a and b to each other from now on."""
        for s, other in ((a, b), (b, a)):
            s.setblocking(False)
            self.peer[s] = other
            self.selector.register(s, selectors.EVENT_READ)

    def forward(self, s):
        other = self.peer[s]
        try:
            data = s.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            if not self.send(other, data):
                self.close(s, other)
            return
        # End of this direction: pass the half-close on, and close the pair once both directions have ended.
        self.selector.unregister(s)
        self.ended.add(s)
        try:
            other.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        if other in self.ended:
            self.close(s, other)

    @staticmethod
    def send(s, data):
        """Writes all of `data` (blocking for a slow reader, within a bound); False when the peer is gone."""
        try:
            s.settimeout(SEND_TIMEOUT_S)
            s.sendall(data)
            s.setblocking(False)
            return True
        except OSError:
            return False

    def close(self, *pair):
        for s in pair:
            if s not in self.ended:
                try:
                    self.selector.unregister(s)
                except (KeyError, ValueError):
                    pass
            self.ended.discard(s)
            self.peer.pop(s, None)
            s.close()
