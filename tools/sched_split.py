#!/usr/bin/env python3
"""Run a command and split its threads' time as the kernel's scheduler saw it.

  sched_split.py COMMAND [ARGS...]

Polls /proc/PID/task/*/schedstat every 20 ms while COMMAND runs (the last reading of each
thread is kept: strata-train's device threads live for the whole run) and prints the
command's stdout, then one JSON line on stderr:

  {"wall_s": ..., "threads": [[cpu_s, runq_s], ...], "cpu_s": ..., "runq_s": ...}

cpu_s is the time a thread ran on a core, runq_s the time it was ready but waited for one
(other processes had it). On a machine whose cores are shared, a run's wall time counts the
runq time; the busiest thread's cpu_s does not, so single-device against several-device CPU
time says how a run would scale on cores of its own. Linux only (schedstat in ns).
"""
import json
import os
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    t0 = time.monotonic()
    p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
    last = {}
    out = []

    def poll():
        try:
            tasks = os.listdir(f"/proc/{p.pid}/task")
        except OSError:
            return
        for t in tasks:
            try:
                with open(f"/proc/{p.pid}/task/{t}/schedstat") as f:
                    run, wait = f.read().split()[:2]
                last[t] = (int(run) / 1e9, int(wait) / 1e9)
            except (OSError, ValueError):
                pass

    os.set_blocking(p.stdout.fileno(), False)
    while p.poll() is None:
        poll()
        chunk = p.stdout.read()
        if chunk:
            out.append(chunk)
        time.sleep(0.02)
    rest = p.stdout.read()
    if rest:
        out.append(rest)
    wall = time.monotonic() - t0
    sys.stdout.buffer.write(b"".join(out))
    sys.stdout.flush()
    threads = sorted(last.values(), key=lambda v: -v[0])
    print(json.dumps({"wall_s": round(wall, 3),
                      "threads": [[round(a, 3), round(b, 3)] for a, b in threads],
                      "cpu_s": round(sum(a for a, _ in threads), 3),
                      "runq_s": round(sum(b for _, b in threads), 3)}), file=sys.stderr)
    sys.exit(p.returncode)


if __name__ == "__main__":
    main()
