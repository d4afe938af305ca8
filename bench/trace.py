#!/usr/bin/env python3
"""Summarizes a CUZK_GPU_TRACE file: per traced prove (one JSON line of spans, all on one
clock per device), the group of streamed sums' length, how busy the compute and copy
streams are inside it, the quotient before it, the handover from the previous prove's last
span to this one's quotient (the slot, the a upload, the token), the cycle (from one
prove's last span to the next one's), and per query the mean device time of a chunk's
copy and sum. One JSON line per prove, then one for the means
over all proves but the first (it pays the warm-up).

    python3 bench/trace.py TRACE.jsonl
"""
import json
import sys


def union(spans):
    total, end = 0.0, None
    for s, e in sorted(spans):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def clip(spans, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in spans if e > lo and s < hi]


def summarize(line):
    spans = line["spans"]
    sums = [(s[3], s[4]) for s in spans if s[2] == "compute" and s[0] != "quotient"]
    copy = [(s[3], s[4]) for s in spans if s[2] == "copy"]
    quotient = [(s[3], s[4]) for s in spans if s[0] == "quotient"]
    if not sums:
        return None
    # The group: from the first sum to the last span (the head's copies run before it,
    # under the quotient).
    start = min(s for s, _ in sums)
    end = max(e for _, e in sums + copy)
    per = {}
    for what, _, stream, s, e in spans:
        if what == "quotient":
            continue
        d = per.setdefault(what, {"chunks": 0, "sum_ms": 0.0, "copy_ms": 0.0})
        if stream == "compute":
            d["chunks"] += 1
            d["sum_ms"] += e - s
        else:
            d["copy_ms"] += e - s
    for d in per.values():
        n = max(d["chunks"], 1)
        d["sum_ms_mean"] = round(d.pop("sum_ms") / n, 3)
        d["copy_ms_mean"] = round(d.pop("copy_ms") / n, 3)
    q = quotient[0] if quotient else None
    return {
        "start_ms": round(start, 1),
        "end_ms": round(end, 1),
        "quotient_ms": None if q is None else round(q[1] - q[0], 1),
        "quotient_to_sums_ms": None if q is None else round(start - q[1], 1),
        "group_ms": round(end - start, 1),
        "compute_busy_ms": round(union(sums), 1),
        "copy_busy_ms": round(union(clip(copy, start, end)), 1),
        "head_copy_ms": round(union(clip(copy, float("-inf"), start)), 1),
        "quotient_start_ms": None if q is None else round(q[0], 1),
        "host": line.get("host", []),
        "per_query": per,
    }


def main(path):
    rows = []
    with open(path) as f:
        for l in f:
            if l.startswith("{"):
                r = summarize(json.loads(l))
                if r:
                    rows.append(r)
    rows.sort(key=lambda r: r["start_ms"])
    for prev, r in zip([None] + rows[:-1], rows):
        # From the previous prove's last span to this one's quotient: the handover (the
        # slot, the a upload, the token).
        q0 = r["quotient_start_ms"]
        r["handover_ms"] = None if prev is None or q0 is None else round(q0 - prev["end_ms"], 1)
        # The host's steps in that handover (events recorded on the idle compute stream):
        # the previous call's return, this call's slot, copies enqueued, token, set-up and
        # ring, each from the previous prove's last span.
        if prev is not None and r["host"]:
            r["host_after_prev_ms"] = {k: round(t - prev["end_ms"], 1) for k, t in r["host"]}
        r.pop("host")
        r["cycle_ms"] = None if prev is None else round(r["end_ms"] - prev["end_ms"], 1)
        print(json.dumps(r))
    steady = rows[1:] or rows
    if not steady:
        print(json.dumps({"op": "trace_means", "proves": 0}))
        return
    mean = lambda k: round(sum(r[k] for r in steady if r[k] is not None) / max(1, sum(1 for r in steady if r[k] is not None)), 1)
    out = {"op": "trace_means", "proves": len(steady)}
    for k in ("cycle_ms", "handover_ms", "quotient_ms", "quotient_to_sums_ms", "group_ms",
              "compute_busy_ms", "copy_busy_ms", "head_copy_ms"):
        out[k] = mean(k)
    marks = {}
    for r in steady:
        for k, v in r.get("host_after_prev_ms", {}).items():
            marks.setdefault(k, []).append(v)
    if marks:
        out["host_after_prev_ms"] = {k: round(sum(v) / len(v), 1) for k, v in marks.items()}
    qs = {}
    for r in steady:
        for q, d in r["per_query"].items():
            a = qs.setdefault(q, {"chunks": d["chunks"], "sum_ms_mean": 0.0, "copy_ms_mean": 0.0})
            a["sum_ms_mean"] += d["sum_ms_mean"] / len(steady)
            a["copy_ms_mean"] += d["copy_ms_mean"] / len(steady)
    out["per_query"] = {q: {k: round(v, 3) for k, v in d.items()} for q, d in qs.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
