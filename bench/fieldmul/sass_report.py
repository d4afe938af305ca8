#!/usr/bin/env python3
"""Per-variant SASS statistics of the __noinline__ product functions.

usage: sass_report.py resource.txt fieldmul.sass

ptxas compiles each __noinline__ function once per calling kernel (whole-program mode), so
the function body is taken from bench_kernel<V, CH>: from the CALL.REL target to its RET.
Registers: highest R register referenced in the body + 1 (and the whole kernel's count from
ptxas); spills: ptxas's figure for the function and LDL/STL in the body."""
import re, sys, collections

NAMES = {0: "V0 fp_mul_ool (a*b)", 1: "V0s fp_mul_ool (a*a)", 2: "V1 fp_sqr_v1", 3: "V2 fp_mul_v2",
         4: "V3 fp_mul_v3", 5: "V4 fp_sqr_v4", 6: "V5 fp_sqr_v5"}
FUNCS = {0: "fp_mul_ool", 1: "fp_mul_ool", 2: "fp_sqr_v1", 3: "fp_mul_v2", 4: "fp_mul_v3", 5: "fp_sqr_v4",
         6: "fp_sqr_v5"}

res_txt, sass_txt = open(sys.argv[1]).read(), open(sys.argv[2]).read()

# ptxas resource usage: per entry, the kernel registers and the spills of the callee.
kern_regs, func_spill = {}, {}
cur_entry = None
lines = res_txt.splitlines()
for i, l in enumerate(lines):
    m = re.search(r"Compiling entry function '(\S+)'", l)
    if m:
        cur_entry = m.group(1)
    m = re.search(r"Used (\d+) registers", l)
    if m and cur_entry:
        kern_regs[cur_entry] = int(m.group(1))
    m = re.search(r"Function properties for (\S+)", l)
    if m and cur_entry and not m.group(1).startswith("_Z12") and i + 1 < len(lines):
        # a callee's properties follow the 'Used N registers' line of the entry calling it
        sp = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", lines[i + 1])
        func_spill[cur_entry] = sp.groups() if sp else None

# SASS: split into kernels
kernels = re.split(r"\n\s*Function : ", sass_txt)
rows = []
for k in kernels[1:]:
    name = k.split("\n", 1)[0].strip()
    m = re.match(r"_Z12bench_kernelILi(\d)ELi(\d)E", name)
    if not m:
        continue
    v, ch = int(m.group(1)), int(m.group(2))
    ins = []  # (addr, text)
    for l in k.splitlines():
        mm = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", l)
        if mm:
            ins.append((int(mm.group(1), 16), mm.group(2).strip()))
    calls = [int(re.search(r"CALL\.REL\.NOINC (0x[0-9a-f]+)", t).group(1), 16) for _, t in ins if "CALL.REL" in t]
    if not calls:
        continue
    start = calls[0]
    body = []
    on = False
    for a, t in ins:
        if a == start:
            on = True
        if on:
            body.append(t)
            if t.startswith("RET"):
                break
    ops = collections.Counter()
    maxreg = -1
    for t in body:
        t2 = re.sub(r"^@!?U?P\w+\s+", "", t)
        op = t2.split()[0]
        ops[op] += 1
        for r in re.findall(r"\bR(\d+)\b", t2):
            maxreg = max(maxreg, int(r))
    base = collections.Counter()
    for op, c in ops.items():
        base[op.split(".")[0]] += c
    rows.append(dict(v=v, ch=ch, kernel=name, n=len(body), ops=ops, base=base, regs=maxreg + 1,
                     kregs=kern_regs.get(name), spill=func_spill.get(name)))

rows.sort(key=lambda r: (r["v"], r["ch"]))
print("Per-variant SASS of the __noinline__ product (body from CALL target to RET), sm_90")
hdr = f"{'variant':24} {'ch':>2} {'instr':>6} {'regs':>5} {'kern':>5} {'spill(st/ld B)':>14} {'IMAD':>5} {'IMAD.WIDE':>9} {'IMAD.HI':>7} {'IMAD.X':>6} {'IADD3':>6} {'IADD3.X':>7} {'DFMA':>5} {'DADD':>5} {'LOP3':>5} {'SHF':>5} {'SEL':>4} {'MOV':>4} {'LDL/STL':>7}"
print(hdr)
for r in rows:
    o = r["ops"]
    imad_plain = sum(c for op, c in o.items() if op.split(".")[0] == "IMAD" and not any(x in op for x in (".WIDE", ".HI", ".X")))
    imad_wide = sum(c for op, c in o.items() if op.startswith("IMAD.WIDE"))
    imad_hi = sum(c for op, c in o.items() if op.startswith("IMAD.HI"))
    imad_x = sum(c for op, c in o.items() if op.startswith("IMAD") and ".X" in op and ".WIDE" not in op and ".HI" not in op)
    iadd3 = sum(c for op, c in o.items() if op.startswith("IADD3") and ".X" not in op)
    iadd3x = sum(c for op, c in o.items() if op.startswith("IADD3") and ".X" in op)
    sp = r["spill"]
    sps = f"{sp[1]}/{sp[2]}" if sp else "?"
    ldst = r["base"]["LDL"] + r["base"]["STL"]
    print(f"{NAMES[r['v']]:24} {r['ch']:>2} {r['n']:>6} {r['regs']:>5} {str(r['kregs']):>5} {sps:>14} {imad_plain:>5} {imad_wide:>9} {imad_hi:>7} {imad_x:>6} {iadd3:>6} {iadd3x:>7} {r['base']['DFMA']:>5} {r['base']['DADD']:>5} {r['base']['LOP3']:>5} {r['base']['SHF']:>5} {r['base']['SEL']:>4} {r['base']['MOV']:>4} {ldst:>7}")
print()
print("Full opcode histograms (ch=2 copies):")
for r in rows:
    if r["ch"] != 2:
        continue
    print(f"  {NAMES[r['v']]}: " + ", ".join(f"{op} {c}" for op, c in sorted(r["ops"].items(), key=lambda x: -x[1])))
