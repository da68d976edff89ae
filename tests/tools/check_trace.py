#!/usr/bin/python3
"""Check a Strata trace with an independent JSON parser (the Python standard library's).

usage: check_trace.py TRACE DEVICES NAME...
Exit 0 when TRACE is a JSON array of Chrome trace events in which every one of DEVICES
tracks (tid 0..DEVICES-1) is named, complete events ("X") nest properly on each track, and
every NAME occurs as an event name (complete or counter) on some device track. Otherwise
prints the first problem and exits 1.
"""
import json
import sys
from collections import defaultdict


def ns(v):
    return round(float(v) * 1000)  # ts and dur are microseconds with nanosecond decimals


def main():
    path, devices, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    with open(path) as f:
        events = json.load(f)
    if not isinstance(events, list):
        sys.exit("not a JSON array")
    named = {e["tid"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    for d in range(devices):
        if d not in named:
            sys.exit(f"track {d} has no thread_name")
    tracks, seen = defaultdict(list), set()
    for e in events:
        ph = e.get("ph")
        if ph not in ("M", "X", "C", "i"):
            sys.exit(f"unexpected phase {ph!r}: {e}")
        if ph == "M":
            continue
        for key in ("name", "pid", "tid", "ts"):
            if key not in e:
                sys.exit(f"event without {key}: {e}")
        if not 0 <= e["tid"] < devices:
            sys.exit(f"event on unknown track {e['tid']}: {e}")
        seen.add(e["name"])
        if ph == "X":
            if ns(e["dur"]) < 0:
                sys.exit(f"negative duration: {e}")
            tracks[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e))
    for key, spans in tracks.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, e in spans:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                sys.exit(f"track {key}: {e['name']} [{start}, {end}] overlaps "
                         f"{stack[-1][2]['name']} [{stack[-1][0]}, {stack[-1][1]}]")
            stack.append((start, end, e))
    missing = [n for n in names if n not in seen]
    if missing:
        sys.exit(f"no event named {missing}; names seen: {sorted(seen)}")
    print(f"ok: {sum(len(s) for s in tracks.values())} complete events on {len(tracks)} tracks")


main()
