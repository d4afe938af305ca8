#!/usr/bin/env python3
"""The streamed sums' ring as a timeline model: which chunk is summed when, and how long the
compute stream waits for copies, from per-chunk copy and sum times (bench/trace.py's
means). It mirrors crates/cuzk-gpu/src/backend/ring.rs (`interleave_order` with its `until`,
`ring_places`: four slots a chunk buffer, two buffers or more, two slots per G1 chunk at or
below 2^23 points) and run.rs's head; keep them in step.
The copies of the first round run under the quotient (done at t = 0); then each copy waits
for the sum last in its slots, each sum for its copy. Scalar uploads are not modelled.

    python3 bench/ring_sim.py      # the measured 2^23 / 2^21 cases and the 2^24 plan
"""


def interleave_order(chunks, head, after, until=()):
    c0 = chunks[0] if chunks else 0
    gate = lambda s: 0 if s == 0 else min(after[s] if s < len(after) else 0, c0)
    end = lambda s: c0 if s == 0 else max(min(until[s] if s < len(until) else c0, c0), gate(s))
    done = [0] * len(chunks)
    order = [(0, j) for j in range(min(head, c0))]
    done[0] = min(head, c0)

    def progress(s):
        d, n = done[s], chunks[s]
        if c0 == 0:
            return d, n
        a = gate(s)
        return a * n + d * (end(s) - a), c0 * n

    while len(order) < sum(chunks):
        best = None
        for s in range(len(chunks)):
            if done[s] >= chunks[s] or done[0] < gate(s):
                continue
            if best is None:
                best = s
                continue
            (nx, dx), (ny, dy) = progress(s), progress(best)
            if nx * dy < ny * dx:
                best = s
        order.append((best, done[best]))
        done[best] += 1
    return order


def ring_places(widths, ring=8):
    last, at, out = [None] * ring, 0, []
    for i, w in enumerate(widths):
        if at % w:
            at += w - at % w
        slot = at % ring
        prev = [x for x in last[slot:slot + w] if x is not None]
        out.append((slot, w, max(prev) if prev else None))
        for k in range(slot, slot + w):
            last[k] = i
        at += w
    return out


def simulate(order, places, copy_ms, sum_ms):
    copy_free = comp_free = idle = 0.0
    copy_end, sum_end, ci = [0.0] * len(order), [0.0] * len(order), 0
    for i, (g, _) in enumerate(order):
        while ci < len(order) and (places[ci][2] is None or places[ci][2] < i):
            a = places[ci][2]
            if a is not None:
                copy_end[ci] = max(copy_free, sum_end[a]) + copy_ms[order[ci][0]]
                copy_free = copy_end[ci]
            ci += 1
        start = max(comp_free, copy_end[i])
        idle += start - comp_free
        comp_free = sum_end[i] = start + sum_ms[g]
    return comp_free, idle


def case(name, chunks, copy_ms, sum_ms, widths, head, b_after, until=(), ring=8):
    order = interleave_order(chunks, head, [0, 0, 0, b_after, b_after], until)
    places = ring_places([widths[g] for g, _ in order], ring)
    group, idle = simulate(order, places, copy_ms, sum_ms)
    print(f"| {name} | {group:.0f} | {sum(sum_ms[g] for g, _ in order):.0f} | {idle:.0f} |")


if __name__ == "__main__":
    print("| case (H, L, A, B G1, B G2 chunks) | group ms | compute ms | compute idle ms |")
    print("|---|---|---|---|")
    # Trace means on an H100, 2026-12-06 (docs/runs/2026-12-06.md): 24 GiB free, 2^23.
    copy, sums = [15.0, 14.6, 14.6, 15.1, 15.2], [83.7, 4.26, 3.89, 7.42, 12.15]
    case("24 GiB, 2^23 (measured idle 84)", [16, 16, 16, 4, 8], copy, sums, [2] * 5, 4, 6)
    # 16 GiB free, 2^21: split chunks a whole buffer.
    copy, sums = [3.77, 7.3, 7.5, 7.5, 7.5], [20.7, 2.86, 2.77, 4.07, 6.53]
    case("16 GiB, 2^21 (measured idle 267)", [64, 32, 31, 8, 16], copy, sums, [2, 4, 4, 4, 4], 4, 18)
    # The same with a third and a fourth chunk buffer (`deeper_ring`: 12 and 16 slots).
    for bufs in (3, 4):
        case(f"16 GiB, 2^21, {bufs} buffers", [64, 32, 31, 8, 16], copy, sums, [2, 4, 4, 4, 4], 4, 18,
             ring=4 * bufs)
    # 2^24 H chunks (modelled: 155.5 ms at c = 20, 30 ms copy), split chunks at 2^23.
    copy, sums = [30.0, 14.6, 14.6, 15.1, 15.2], [155.5, 4.26, 3.89, 7.42, 12.15]
    for head in (4, 2, 1):
        case(f"24 GiB, 2^24 H, head {head}", [8, 16, 16, 4, 8], copy, sums, [2, 1, 1, 1, 1], head, 4)
    case("24 GiB, 2^24 H, four slots (before)", [8, 16, 16, 4, 8], copy, sums, [2, 2, 2, 2, 2], 2, 4)
    # L and A done once H has done 7 of 8 (a's place free for the next partition's a).
    case("24 GiB, 2^24 H, head 2, L and A until 7", [8, 16, 16, 4, 8], copy, sums, [2, 1, 1, 1, 1],
         2, 4, [8, 7, 7, 8, 8])
