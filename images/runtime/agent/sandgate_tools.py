"""The agent's side of tool calls from sandboxed code (sandgate.tools): the program writes one request line,
{"name", "args"}, on its end of a socket pair it got as $SANDGATE_TOOLS_FD; each becomes a tool_call frame to the
worker, which checks it against the tenant's tools, makes the call and answers with a tool_result op; the answer goes
back to the program as one line, {"ok", "result"} or {"ok": false, "error"}. The sandbox itself reaches no network:
the worker makes every call."""
import json
import socket
import threading

MAX_REQUEST = 1 << 20


class ToolBridge:
    def __init__(self, proto, run_id):
        self.proto = proto
        self.run_id = run_id
        self.ours, self.theirs = socket.socketpair()
        self.theirs.set_inheritable(True)
        self.lock = threading.Lock()
        self.pending = {}
        self.calls = 0
        self.closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def fd(self):
        return self.theirs.fileno()

    def answer(self, msg):
        """A tool_result op from the worker."""
        with self.lock:
            waiter = self.pending.pop(msg.get("call"), None)
        if waiter is not None:
            waiter[1].append(msg)
            waiter[0].set()

    def close(self):
        with self.lock:
            self.closed = True
            waiters = list(self.pending.values())
            self.pending.clear()
        for event, box in waiters:
            box.append({"ok": False, "error": "the run ended"})
            event.set()
        for s in (self.ours, self.theirs):
            try:
                s.close()
            except OSError:
                pass

    def _serve(self):
        try:
            reader = self.ours.makefile("rb")
            while True:
                line = reader.readline(MAX_REQUEST + 1)
                if not line:
                    return
                self.ours.sendall((json.dumps(self._call(line), separators=(",", ":")) + "\n").encode())
        except OSError:
            return

    def _call(self, line):
        if len(line) > MAX_REQUEST or not line.endswith(b"\n"):
            return {"ok": False, "error": "the request is over %d bytes" % MAX_REQUEST}
        try:
            request = json.loads(line)
        except ValueError:
            return {"ok": False, "error": "the request is not JSON"}
        if not isinstance(request, dict) or not isinstance(request.get("name"), str):
            return {"ok": False, "error": "a request is {\"name\": ..., \"args\": {...}}"}
        args = request.get("args")
        args = {} if args is None else args
        event, box = threading.Event(), []
        with self.lock:
            if self.closed:
                return {"ok": False, "error": "the run ended"}
            self.calls += 1
            call = self.calls
            self.pending[call] = (event, box)
        self.proto.send({"t": "tool_call", "id": self.run_id, "call": call, "name": request["name"], "args": args})
        event.wait()
        answer = box[0]
        if answer.get("ok") is True:
            return {"ok": True, "result": answer.get("result")}
        return {"ok": False, "error": str(answer.get("error") or "the call failed")}
