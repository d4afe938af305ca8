#!/usr/bin/env python3
"""Runs a command in a fresh memory cgroup with a limit, as a host of that size (a systemd
unit's MemoryMax=, a container's --memory) would run it, and prints one JSON line:

    {"limit_bytes": ..., "cgroup": "...", "exit": 0, "signal": null, "oom_kills": 0,
     "peak_cgroup_bytes": ..., "peak_rss_bytes": ..., "wall_s": ...}

    python3 bench/cgroup_run.py 4G -- cuzk bench batch --log-n 20 ...

The cgroup is a child of this process's own, in the v1 memory controller's hierarchy or
in cgroup v2's (where the parent must delegate the memory controller), and is removed
afterwards. The command's output passes through; the JSON line goes to stdout last.
peak_cgroup_bytes counts the page cache the command's reads brought in (the kernel
reclaims it before it kills); peak_rss_bytes is the process tree's largest resident set
(getrusage of the children). oom_kills is the kernel's count of OOM kills in the cgroup;
removed says the cgroup was taken away afterwards.
Needs root: exits 3, saying why, when no memory cgroup can be made. Finds this process's
cgroups as the engine's sizing does (cuzk_engine::sizing::cgroup_memory_limit: the
mounts' roots from /proc/self/mountinfo); the cuzk e2e test
print_config_sizes_the_budgets_from_the_memory_cgroup_it_runs_in runs the daemon with it.
"""
import json
import os
import re
import subprocess
import sys
import time


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMGT]?)i?B?", text.strip(), re.IGNORECASE)
    if not m:
        sys.exit(f"cgroup_run: not a size: {text} (e.g. 4G, 512M, 68719476736)")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2).upper()]


def unescape(field):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def own_memory_cgroups():
    """(directory, version) of this process's cgroup in each hierarchy that can limit
    memory: the v1 memory controller's first, then v2's."""
    v1 = v2 = None
    with open("/proc/self/cgroup") as f:
        for line in f:
            hid, controllers, path = line.rstrip("\n").split(":", 2)
            if hid == "0" and controllers == "":
                v2 = path
            elif "memory" in controllers.split(","):
                v1 = path
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            before, _, after = line.rstrip("\n").partition(" - ")
            fields, fs = before.split(" "), after.split(" ")
            if len(fields) < 5 or len(fs) < 3:
                continue
            root, point = unescape(fields[3]), unescape(fields[4])
            if fs[0] == "cgroup" and "memory" in fs[2].split(",") and v1 is not None:
                path, version = v1, 1
            elif fs[0] == "cgroup2" and v2 is not None:
                path, version = v2, 2
            else:
                continue
            inside = path == root or path.startswith(root.rstrip("/") + "/")
            rel = os.path.relpath(path, root) if inside else "."
            found.append((os.path.normpath(os.path.join(point, rel)), version))
    found.sort(key=lambda d: d[1])
    return found


def make_child(limit):
    name = f"cuzk-bench-{os.getpid()}"
    for parent, version in own_memory_cgroups():
        child = os.path.join(parent, name)
        limit_file = "memory.limit_in_bytes" if version == 1 else "memory.max"
        try:
            os.mkdir(child)
        except OSError:
            continue
        try:
            with open(os.path.join(child, limit_file), "w") as f:
                f.write(str(limit))
            return child, version
        except OSError:
            os.rmdir(child)
    sys.stderr.write(
        "cgroup_run: no writable memory cgroup here (needs root, and a v1 memory "
        "controller or a v2 parent that delegates memory)\n"
    )
    sys.exit(3)


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def counter(text, key):
    m = re.search(rf"^{key} (\d+)$", text or "", re.MULTILINE)
    return int(m.group(1)) if m else None


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--":
        sys.exit(__doc__)
    limit = parse_size(args[0])
    child, version = make_child(limit)
    procs = os.path.join(child, "cgroup.procs")
    start = time.monotonic()

    def enter():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    try:
        proc = subprocess.Popen(args[2:], preexec_fn=enter)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = code = os.waitstatus_to_exitcode(status)
    finally:
        wall = time.monotonic() - start
        if version == 1:
            peak = int(read(os.path.join(child, "memory.max_usage_in_bytes"), "0"))
            kills = counter(read(os.path.join(child, "memory.oom_control")), "oom_kill")
        else:
            peak = int(read(os.path.join(child, "memory.peak"), "0") or 0)
            kills = counter(read(os.path.join(child, "memory.events")), "oom_kill")
        # The cgroup empties when the command exits; the kernel may take a moment to see it.
        removed = False
        for _ in range(100):
            try:
                os.rmdir(child)
                removed = True
                break
            except OSError:
                time.sleep(0.05)
    print(
        json.dumps(
            {
                "limit_bytes": limit,
                "cgroup": f"v{version} {child}",
                "exit": code if code >= 0 else None,
                "signal": -code if code < 0 else None,
                "oom_kills": kills,
                "peak_cgroup_bytes": peak,
                "peak_rss_bytes": usage.ru_maxrss * 1024,
                "wall_s": round(wall, 1),
                "removed": removed,
            }
        ),
        flush=True,
    )
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
