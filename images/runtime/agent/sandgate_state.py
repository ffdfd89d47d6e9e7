"""A stateful session's variables, saved and loaded with dill inside the interpreter (sandgate_interpreter.py).

What is saved is the cells' module (__main__) as `dill.dump_module` writes it: variables, functions and classes the
cells defined (by value), and modules and what is defined in them (by reference: imported again on load).
(`refimported=True` would also save by reference what was imported under another name, but it maps every loaded
module first: 350 ms with pandas loaded, which every pause would pay.)
Left out, and named, are what cannot outlive the process that holds it — open files, sockets, threads, running
generators — and whatever dill fails on, found by trying each remaining variable on its own.

The bytes are written to, or read from, a pipe the agent passed along; they never leave the sandbox but to be kept by
the platform, and are only ever unpickled here, in a sandbox of the session they came from.
"""
import io
import os
import socket
import threading
import types

# Kinds that name a resource of the living process: saving them would pretend to keep what cannot be kept.
PROCESS_BOUND = (
    (io.IOBase, "an open file"),
    (socket.socket, "a socket"),
    (threading.Thread, "a thread"),
    (types.GeneratorType, "a running generator"),
    (types.CoroutineType, "a running coroutine"),
    (types.AsyncGeneratorType, "a running generator"),
)
MAX_REASON = 200
PIPE_BUFFER = 1 << 20


def user_names(main):
    return [n for n in list(main.__dict__) if not (n.startswith("__") and n.endswith("__"))]


def process_bound(value):
    for kind, reason in PROCESS_BOUND:
        if isinstance(value, kind):
            return reason
    return None


class Discard(io.RawIOBase):
    """A sink that keeps nothing: trying a variable on its own costs its pickling, not its bytes."""

    def writable(self):
        return True

    def write(self, b):
        return len(b)


def dump_without(dill, main, out, left_out):
    """dump_module with the names in `left_out` out of the module for the while; put back whatever happens."""
    held = {n: main.__dict__.pop(n) for n in list(left_out) if n in main.__dict__}
    try:
        dill.dump_module(out, module=main)
    finally:
        main.__dict__.update(held)


def culprits(dill, main, left_out):
    """The variables dill cannot save, each tried alone (a function's globals, the module, go by reference)."""
    found = {}
    for name in user_names(main):
        if name in left_out:
            continue
        try:
            dill.dump(main.__dict__[name], Discard())
        except Exception as e:  # noqa: BLE001 - any failure of the pickler names the variable
            found[name] = ("%s: %s" % (type(e).__name__, e))[:MAX_REASON]
    return found


def dump(main, pipe, exclude):
    """Saves `main` to `pipe` (closed at the end); `exclude` (name -> reason) is left out as well."""
    out = os.fdopen(pipe, "wb", buffering=PIPE_BUFFER)
    try:
        import dill
    except ImportError:
        out.close()
        return {"code": 1, "error": "dill is not installed in this sandbox image"}
    left_out = {str(k)[:256]: str(v)[:MAX_REASON] for k, v in exclude.items()}
    for name in user_names(main):
        reason = process_bound(main.__dict__.get(name))
        if reason is not None:
            left_out[name] = reason
    failure = None
    try:
        with out:
            dump_without(dill, main, out, left_out)
    except BrokenPipeError:
        return {"code": 1, "error": "the agent stopped reading"}
    except Exception as e:  # noqa: BLE001 - a variable dill cannot save: found below
        failure = e
    if failure is None:
        saved = [n for n in user_names(main) if n not in left_out]
        return {"code": 0, "saved": len(saved), "unsaved": [[n, r] for n, r in sorted(left_out.items())]}
    found = culprits(dill, main, left_out)
    if not found:
        return {"code": 1, "error": ("%s: %s" % (type(failure).__name__, failure))[:MAX_REASON]}
    return {"code": 1, "culprits": [[n, r] for n, r in sorted(found.items())]}


def load(main, pipe):
    """Loads what dump saved, from `pipe`, into `main`: its variables over whatever is there."""
    source = os.fdopen(pipe, "rb", buffering=PIPE_BUFFER)
    with source:
        try:
            import dill
        except ImportError:
            return {"code": 1, "error": "dill is not installed in this sandbox image"}
        try:
            dill.load_module(source, module=main)
        except Exception as e:  # noqa: BLE001 - whatever stops the load is reported, not raised
            return {"code": 1, "error": ("%s: %s" % (type(e).__name__, e))[:MAX_REASON]}
    return {"code": 0, "restored": len(user_names(main))}
