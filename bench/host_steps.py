#!/usr/bin/env python3
"""Where a device's compute calls wait, read back from a `bench batch --timeline` SVG.

The engine lays each compute call's host steps end to end from the call's start (prepare,
srs, fill, token_wait: the slot, the copies enqueued, the token), and draws its compute
span where the backend held the token. For each call after the first on DEVICE (default
gpu:0), the times from the previous call's end (the compute span that ended last before
this one's token): when the call started, when its fill ended, when its token span began.
A fill that ends after the previous call's end is a call that was not ready for the slot.
Time the call spent before its first laid-out step (a load inside the backend's call)
shows as a token span that begins long after its laid-out steps end.

    bench/host_steps.py timeline.svg [DEVICE]

Prints one JSON line per call and one `host_steps_means` line.
"""
import html
import json
import re
import sys

TITLE = re.compile(r"<title>(.*?)</title>")
LABEL = re.compile(r"^(\S+) p(\d+) (\S+) (\S+) @([0-9.]+)\+([0-9.]+) ms$")
HOST = ("prepare", "srs", "fill", "token_wait")


def calls(svg, device):
    """Compute spans on DEVICE's worker lanes, each with its host steps' ends."""
    spans = {}
    for raw in TITLE.findall(svg):
        m = LABEL.match(html.unescape(raw))
        if not m:
            continue
        job, part, stage, worker, start, dur = m.groups()
        if not worker.startswith(device + "/w"):
            continue
        c = spans.setdefault((job, int(part), worker), {"worker": worker, "steps": {}})
        start, dur = float(start), float(dur)
        if stage == "compute":
            c["start"], c["end"] = start, start + dur
        elif stage in HOST:
            c["steps"][stage] = start + dur
            c["first"] = min(c.get("first", start), start)
    return sorted((c for c in spans.values() if "start" in c), key=lambda c: c["start"])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    device = sys.argv[2] if len(sys.argv) > 2 else "gpu:0"
    with open(sys.argv[1]) as f:
        rows = calls(f.read(), device)
    out = []
    for c in rows:
        # The previous call's end, allowing for the ms rounding of the titles' times.
        before = [p["end"] for p in rows if p is not c and p["end"] <= c["start"] + 5.0]
        if not before:
            continue
        prev = max(before)
        r = {"worker": c["worker"], "token": round(c["start"] - prev, 1)}
        if "first" in c:
            r["started"] = round(c["first"] - prev, 1)
        if "fill" in c["steps"]:
            r["fill_end"] = round(c["steps"]["fill"] - prev, 1)
        out.append(r)
        print(json.dumps(r))
    steady = out[1:] or out
    means = {"op": "host_steps_means", "device": device, "calls": len(steady)}
    for k in ("started", "fill_end", "token"):
        v = [r[k] for r in steady if k in r]
        if v:
            means[k + "_ms"] = round(sum(v) / len(v), 1)
            means[k + "_max_ms"] = max(v)
    print(json.dumps(means))


if __name__ == "__main__":
    main()
