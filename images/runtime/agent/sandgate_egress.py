"""The sandbox's way out, when its tenant has egress: a relay from the HTTP proxy port on loopback to the worker's
egress proxy. On Docker that is a Unix socket mounted into this sandbox only ($SANDGATE_EGRESS_SOCKET); a Kubernetes
session Pod reaches nothing at all, so there ($SANDGATE_EGRESS_VIA_AGENT) the worker opens connections to the agent's
port ahead of need (an "egress" hello with the agent's token), the agent parks them, and each connection to the proxy
port takes one: the agent sends it one byte, "+", and relays from then on (ReverseRelay). Either way the worker
decides every request (the tenant's allow-list, the session's private flag). The agent starts the relay before
anything else runs, and every program finds it through HTTP_PROXY and HTTPS_PROXY.

One thread relays every connection (a thread each would count against the sandbox's process limit).
"""
import collections
import queue
import selectors
import socket
import threading
import time

ENV = "SANDGATE_EGRESS_SOCKET"
VIA_AGENT_ENV = "SANDGATE_EGRESS_VIA_AGENT"
PORT = 3128
# How long a connection to the proxy port waits for the worker's next parked connection.
PARKED_WAIT_S = 10
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
    """Listens on 127.0.0.1:PORT and relays each connection to the proxy socket at `path` (None: to connections the
    worker parks with the agent), in a daemon thread. Answers the relay."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", PORT))
    server.listen(64)
    relay = Relay(server, path) if path is not None else ReverseRelay(server)
    threading.Thread(target=relay.serve, name="sandgate-egress", daemon=True).start()
    return relay


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


class ReverseRelay(Relay):
    """Relays each connection to the proxy port through a connection the worker parked with the agent (park()).
    Taking one: the agent sends "+", the worker answers "!" once the connection is its proxy's, and only then does the
    client's first byte go (so the worker reads the "+" alone)."""

    def __init__(self, server):
        Relay.__init__(self, server, None)
        self.parked = set()
        self.waiting = collections.deque()  # (client, since): no parked connection was there for it yet
        self.taking = {}  # upstream -> (client, since): "+" sent, "!" awaited
        self.inbox = queue.Queue()
        self.wake_r, self.wake_w = socket.socketpair()

    def park(self, conn):
        """Called from the agent's accept thread with a worker's authenticated egress connection."""
        self.inbox.put(conn)
        try:
            self.wake_w.send(b"x")
        except OSError:
            pass

    def serve(self):
        self.selector.register(self.server, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        while True:
            for key, _ in self.selector.select(timeout=1):
                s = key.fileobj
                if s is self.server:
                    self.accept()
                elif s is self.wake_r:
                    self.take_inbox()
                elif s in self.parked:
                    # A parked connection says nothing until it is taken: this is its end (the worker went away).
                    self.parked.discard(s)
                    self.selector.unregister(s)
                    s.close()
                elif s in self.taking:
                    self.taken(s)
                elif s in self.peer:
                    self.forward(s)
            self.expire()

    def take_inbox(self):
        try:
            self.wake_r.recv(4096)
        except OSError:
            pass
        while True:
            try:
                conn = self.inbox.get_nowait()
            except queue.Empty:
                break
            conn.setblocking(False)
            self.parked.add(conn)
            self.selector.register(conn, selectors.EVENT_READ)
        self.match()

    def accept(self):
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        self.waiting.append((conn, time.monotonic()))
        self.match()

    def match(self):
        """Offers each waiting client, oldest first, a parked connection."""
        while self.waiting and self.parked:
            upstream = self.parked.pop()
            if not self.send(upstream, b"+"):
                self.selector.unregister(upstream)
                upstream.close()
                continue
            self.taking[upstream] = self.waiting.popleft()

    def taken(self, upstream):
        client, _ = self.taking.pop(upstream)
        self.selector.unregister(upstream)
        try:
            ack = upstream.recv(1)
        except OSError:
            ack = b""
        if ack != b"!":
            upstream.close()
            self.refuse(client)
            return
        self.pair(client, upstream)

    def expire(self):
        now = time.monotonic()
        while self.waiting and now - self.waiting[0][1] > PARKED_WAIT_S:
            self.refuse(self.waiting.popleft()[0])
        for upstream, (client, since) in list(self.taking.items()):
            if now - since > PARKED_WAIT_S:
                del self.taking[upstream]
                self.selector.unregister(upstream)
                upstream.close()
                self.refuse(client)

    @staticmethod
    def refuse(client):
        try:
            client.setblocking(True)
            client.settimeout(1)
            client.sendall(UNREACHABLE)
        except OSError:
            pass
        client.close()
