"""pytest plugin of sandgate's test mode (sandgate-test): one line per test as it ends, then a summary, each the
marker given with --sandgate-marker followed by JSON, written to the process's own stdout (pytest captures the tests'
output on its own, so these lines are never mixed into a test's)."""
import json
import os

MAX_ERROR = 2000
_out = os.dup(1)
_state = {"marker": None, "passed": 0, "failed": 0, "skipped": 0, "errors": []}


def pytest_addoption(parser):
    parser.addoption("--sandgate-marker", default=None)


def pytest_configure(config):
    _state["marker"] = config.getoption("--sandgate-marker")


def _emit(obj):
    marker = _state["marker"]
    if marker is None:
        return
    data = (marker + " " + json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8")
    while data:
        data = data[os.write(_out, data):]


def _message(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        text = crash.message
    elif isinstance(report.longrepr, tuple):  # a skip: (path, line, reason)
        text = str(report.longrepr[2])
    else:
        text = str(report.longrepr)
    return text[:MAX_ERROR]


def _name(report):
    return report.nodeid.split("::", 1)[1] if "::" in report.nodeid else report.nodeid


def pytest_runtest_logreport(report):
    # A test ends at its call, or earlier when its setup failed or skipped it; a failing teardown fails it too.
    if report.when == "call" or (report.when == "setup" and not report.passed) or (
        report.when == "teardown" and report.failed
    ):
        if report.skipped:
            outcome = "skipped"
        elif report.passed:
            outcome = "passed"
        else:
            outcome = "failed"
        _state[outcome] += 1
        _emit({
            "name": _name(report),
            "passed": outcome == "passed",
            "skipped": outcome == "skipped",
            "error": None if outcome == "passed" else _message(report),
            "duration_ms": round(report.duration * 1000, 3),
        })


def pytest_collectreport(report):
    if report.failed:
        # A collection error's report is a whole traceback; its "E" lines say what went wrong (a SyntaxError's
        # file, line, caret and message).
        text = str(report.longrepr)
        told = [line[2:] for line in text.splitlines() if line.startswith("E ")]
        _state["errors"].append(("\n".join(told) if told else text[-MAX_ERROR:])[:MAX_ERROR])


def pytest_sessionfinish(session, exitstatus):
    total = _state["passed"] + _state["failed"] + _state["skipped"]
    summary = {"total": total, "passed": _state["passed"], "failed": _state["failed"], "skipped": _state["skipped"]}
    _emit({"summary": summary, "errors": _state["errors"][:10]})
