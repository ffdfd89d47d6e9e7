"""The stateful interpreter of the sandgate agent: one globals dict for the life of the sandbox, like a
notebook kernel. Code runs on the agent's main thread, so an interrupt (SIGINT sent to that thread by the
control thread) raises KeyboardInterrupt in it and the interpreter keeps its state."""
import ast
import io
import linecache
import os
import signal
import sys
import threading
import traceback

import sandgate_plots

# Cells keep their source in linecache, so tracebacks show the offending lines; the oldest are forgotten.
KEPT_CELLS = 200
AGENT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class Interpreter:
    def __init__(self, pump, interrupted):
        self.pump = pump
        self.interrupted = interrupted
        self.globals = {"__name__": "__main__", "__builtins__": __builtins__, "__doc__": None}
        self.env_keys = {}
        self.fresh = True
        self.cells = 0
        self.in_user_code = False
        self.main_ident = threading.main_thread().ident
        # Like `python3 -c`: the working directory first on sys.path, so modules in /mnt/data import.
        sys.path[0] = ""
        signal.signal(signal.SIGINT, self._on_sigint)
        sandgate_plots.install()
        self._frame_output_on_exit()

    def _frame_output_on_exit(self):
        # os._exit in a cell ends the agent at once, before the pump has read what the cell printed: that is
        # framed first, as a dying program's pipes would still be read. (Not in forked children: their copy of
        # the pump is not theirs to drain.)
        real_exit, agent_pid = os._exit, os.getpid()

        def _exit(status):
            if os.getpid() == agent_pid and self.in_user_code:
                flush()
                self.pump.end()
            real_exit(status)

        os._exit = _exit

    def _on_sigint(self, signum, frame):
        # Runs on the main thread between bytecodes; only user code is interrupted, never the agent.
        if self.in_user_code:
            raise KeyboardInterrupt

    def interrupt(self):
        if self.in_user_code:
            # A real signal to the main thread, so a blocking call (time.sleep, a read) is cut short too.
            signal.pthread_kill(self.main_ident, signal.SIGINT)

    def run(self, msg, cap):
        self._apply_env(msg.get("env") or {})
        sys.stdin = io.StringIO(msg.get("stdin") or "")
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        self.pump.restore_std_fds()
        self.pump.begin(cap)
        restarted, self.fresh = self.fresh, False
        try:
            code, value = self._execute(msg.get("code", ""))
        finally:
            flush()
            self.pump.end()
        frame = {"code": code, "restarted": restarted}
        if value is not None:
            frame["value"] = value if len(value) <= cap else value[:cap] + "..."
        return frame

    def _remember(self, source):
        self.cells += 1
        linecache.cache.pop("<cell-%d>" % (self.cells - KEPT_CELLS), None)
        filename = "<cell-%d>" % self.cells
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        return filename

    def _execute(self, source):
        filename = self._remember(source)
        try:
            tree = ast.parse(source, filename, "exec")
        except (SyntaxError, ValueError) as e:
            print_exception(e, skip=0)
            return 1, None
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        try:
            try:
                self.in_user_code = True
                if self.interrupted.is_set():
                    raise KeyboardInterrupt
                exec(compile(tree, filename, "exec"), self.globals)
                result = None if last is None else eval(compile(last, filename, "eval"), self.globals)
            finally:
                self.in_user_code = False
            sandgate_plots.patch_loaded()
            return 0, None if result is None else safe_repr(result)
        except SystemExit as e:
            return exit_status(e), None
        except BaseException as e:  # the user's exception, KeyboardInterrupt included
            sandgate_plots.patch_loaded()
            print_exception(e, skip=1)
            return 1, None

    def _apply_env(self, env):
        # The previous run's variables go unless the code changed them; the new run's are set. Variables the
        # code set itself stay, as they would in a notebook.
        for key, value in self.env_keys.items():
            if os.environ.get(key) == value:
                del os.environ[key]
        os.environ.update(env)
        self.env_keys = dict(env)


def safe_repr(value):
    try:
        return repr(value)
    except BaseException as e:
        return "<repr failed: %s: %s>" % (type(e).__name__, e)


def exit_status(e):
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


def print_exception(e, skip):
    """A normal traceback, minus the agent's own frames (the exec call, the SIGINT handler)."""
    tb = e.__traceback__
    for _ in range(skip):
        if tb is not None:
            tb = tb.tb_next
    try:
        te = traceback.TracebackException(type(e), e, tb)
        te.stack = traceback.StackSummary.from_list([f for f in te.stack if not f.filename.startswith(AGENT_DIR)])
        sys.stderr.write("".join(te.format()))
    except BaseException:
        sys.stderr.write("%s: %s\n" % (type(e).__name__, e))


def flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass
