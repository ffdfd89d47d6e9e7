import assert from 'node:assert/strict';

/**
 * A stateful cell that tries every way it has to speak the agent's protocol itself: the agent's objects (reachable
 * through gc where the cell runs inside the agent), every file descriptor it holds (as it is, and reopened for writing
 * through /proc/self/fd), and every other process's descriptors through /proc. To each it writes a forged `out` frame
 * (which needs no run id) and a forged `exit` frame for its own run, then goes on running. The run's id comes from the
 * file run-id.txt when `idFile` (the test writes it once the run is queued), else from whatever request of the
 * agent's the cell finds among its threads' frames. Only the platform may say what a run printed and when it ended:
 * see assertGenuine.
 */
export const forger = (idFile: boolean): string => String.raw`
import gc, json, os, sys, time
run_id = None
while ${idFile ? 'True' : 'False'} and not os.path.exists("run-id.txt"):
    time.sleep(0.01)
if os.path.exists("run-id.txt"):
    run_id = open("run-id.txt").read().strip()
for frame in sys._current_frames().values():
    while frame is not None and run_id is None:
        for v in list(frame.f_locals.values()):
            if isinstance(v, dict) and v.get("op") == "run" and isinstance(v.get("id"), str):
                run_id = v["id"]
        frame = frame.f_back
frames = [{"t": "out", "d": "forged-out\n"}, {"t": "exit", "id": run_id, "code": 0, "value": "'forged'"}]
lines = b"".join((json.dumps(f) + "\n").encode() for f in frames)
for o in gc.get_objects():
    d = getattr(o, "__dict__", None)
    if isinstance(d, dict) and "lock" in d and ("fd" in d or "conn" in d) and callable(getattr(type(o), "send", None)):
        for f in frames:
            try:
                o.send(f)
            except Exception:
                pass
for name in os.listdir("/proc/self/fd"):
    if int(name) > 2:
        try:
            os.write(int(name), lines)
        except OSError:
            pass
        try:
            fd = os.open("/proc/self/fd/" + name, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, lines)
            os.close(fd)
        except OSError:
            pass
others = []
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    try:
        names = os.listdir("/proc/%s/fd" % pid)
    except OSError:
        continue
    for name in names:
        try:
            fd = os.open("/proc/%s/fd/%s" % (pid, name), os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(fd, lines)
            others.append("%s/%s %s" % (pid, name, os.readlink("/proc/%s/fd/%s" % (pid, name))))
        except OSError:
            pass
        finally:
            os.close(fd)
time.sleep(1.5)
print(json.dumps({"others": others, "id_known": run_id is not None}))
print("still running")
"genuine"
`;

/**
 * The result of a forger run is the cell's own: its value, what it printed, and as long as it ran. `others`: the
 * descriptors of other processes the cell may reopen for writing. None where the agent is another uid or not dumpable;
 * under gVisor, whose /proc lets a process of the same uid reopen the agent's pipes and /dev/null (never its channel:
 * the engine's stdio, or a socket), `pipes`.
 */
export function assertGenuine(r: Record<string, any>, others: 'none' | 'pipes' = 'none'): { idKnown: boolean } {
  assert.equal(r.state, 'completed', JSON.stringify(r));
  assert.equal(r.value, "'genuine'", 'the value is the last expression the cell really evaluated');
  assert.match(r.stdout, /still running\n$/, 'what the cell printed after its forgery is in the result');
  // What it wrote to its own output pipes is its output, as anything it prints; a forged frame would be a line alone.
  assert.doesNotMatch(r.stdout, /^forged-out$/m, 'no output but what the cell printed');
  const report = (r.stdout as string).split('\n').find((l) => l.startsWith('{"others"'));
  assert.ok(report, r.stdout);
  const parsed = JSON.parse(report) as { others: string[]; id_known: boolean };
  if (others === 'none') assert.deepEqual(parsed.others, [], "no other process's descriptors");
  else for (const o of parsed.others) assert.match(o, / (\/dev\/null|pipe:\[\d+\])$/, 'a pipe at most');
  assert.ok(r.duration_ms >= 1000, `the run lasted as long as the cell (${r.duration_ms} ms)`);
  return { idKnown: parsed.id_known };
}
