"""The sandbox's live figures, read from its own cgroup: what the gateway's GET /v1/sessions/{id}/metrics shows.

Both backends read the same files from inside the sandbox (docs/adr/0017-session-metrics-from-the-sandbox-cgroup.md):
a Docker container and a Kubernetes container each see their own cgroup at /sys/fs/cgroup, v2 (one tree) or v1 (a
tree per controller). CPU is a counter: the host takes the difference of two samples over the time between them.
Memory leaves out inactive file cache, as `docker stats` does: pages the kernel drops before the limit is reached.
"""
import os
import time

ROOT = "/sys/fs/cgroup"
# A limit this large (v1's "no limit" is the page-rounded largest signed 64-bit number) means none.
UNLIMITED = 1 << 60


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def number(path):
    text = read(path)
    if text is None or text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def stat_field(path, *names):
    text = read(path)
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in names:
            return int(value)
    return None


def limit(value):
    return value if value is not None and value < UNLIMITED else None


def sample():
    """One reading: {cpu_usage_ns, monotonic_ns, memory_bytes, memory_limit_bytes, pids, cgroup}; a figure the sandbox
    cannot read is None."""
    now = time.monotonic_ns()
    if os.path.exists(ROOT + "/cgroup.controllers"):
        usage_us = stat_field(ROOT + "/cpu.stat", "usage_usec")
        memory = number(ROOT + "/memory.current")
        inactive = stat_field(ROOT + "/memory.stat", "inactive_file") or 0
        return {
            "cgroup": 2,
            "monotonic_ns": now,
            "cpu_usage_ns": None if usage_us is None else usage_us * 1000,
            "memory_bytes": None if memory is None else max(memory - inactive, 0),
            "memory_limit_bytes": limit(number(ROOT + "/memory.max")),
            "pids": number(ROOT + "/pids.current"),
        }
    memory = number(ROOT + "/memory/memory.usage_in_bytes")
    inactive = stat_field(ROOT + "/memory/memory.stat", "total_inactive_file") or 0
    return {
        "cgroup": 1,
        "monotonic_ns": now,
        "cpu_usage_ns": number(ROOT + "/cpuacct/cpuacct.usage"),
        "memory_bytes": None if memory is None else max(memory - inactive, 0),
        "memory_limit_bytes": limit(number(ROOT + "/memory/memory.limit_in_bytes")),
        "pids": number(ROOT + "/pids/pids.current"),
    }
