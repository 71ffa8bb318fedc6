#!/usr/bin/env python3
"""bench/gpu_split_report.py LOG: the tables of a bench/gpu_split.sh run (its JSON and text files).

For each model and test (pp512, tg128): oxidize by -sm none, layer and row against llama.cpp's
none, layer and tensor; oxidize's best split against llama.cpp's best split, and oxidize's row
split against its one GPU. Then the row split's other paths (NCCL's sums, no CUDA graphs, two
processes) and aggregate decode (oxidize --batch against llama-batched-bench's S_TG)."""
import glob
import json
import os
import re
import sys

LOG = sys.argv[1]


def runs(pattern):
    """Every row of the JSON files that match: oxidize bench's or llama-bench's."""
    rows = []
    for path in glob.glob(os.path.join(LOG, pattern)):
        try:
            rows += json.load(open(path))
        except (ValueError, OSError):
            pass
    return rows


def test_name(r):
    if "test" in r and " x" not in r["test"]:
        return r["test"]
    return "pp%d" % r["n_prompt"] if r.get("n_prompt") else "tg%d" % r["n_gen"]


def mean(pattern, test):
    vals = [r["avg_ts"] for r in runs(pattern) if test_name(r) == test and r.get("n_parallel", 1) == 1]
    return sum(vals) / len(vals) if vals else None


def fmt(v, f="%.1f"):
    return f % v if v else "-"


def ratio(a, b):
    return "%.2f" % (a / b) if a and b else "-"


def llama_batched(path):
    """{B: S_TG} from llama-batched-bench's table."""
    out = {}
    try:
        for line in open(path):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 8 and cells[2].isdigit():
                out[int(cells[2])] = float(cells[7])
    except OSError:
        pass
    return out


def main():
    gpus = os.path.join(LOG, "gpus.txt")
    if os.path.exists(gpus):
        print(open(gpus).read().strip())
    models = sorted({re.match(r"ox-(.*)-(none|layer|row)-\d\.json", os.path.basename(p)).group(1)
                     for p in glob.glob(os.path.join(LOG, "ox-*-*-[0-9].json"))
                     if re.match(r"ox-(.*)-(none|layer|row)-\d\.json", os.path.basename(p))})
    print()
    print("| model | test | ox none | ox layer | ox row | ll none | ll layer | ll tensor |"
          " best split ox/ll | ox row/none |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m in models:
        for test in ("pp512", "tg128"):
            ox = {sm: mean("ox-%s-%s-[0-9].json" % (m, sm), test) for sm in ("none", "layer", "row")}
            ll = {sm: mean("ll-%s-%s-[0-9].json" % (m, sm), test) for sm in ("none", "layer", "row")}
            best_ox = max([v for k, v in ox.items() if k != "none" and v] or [0]) or None
            best_ll = max([v for k, v in ll.items() if k != "none" and v] or [0]) or None
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                m, test, fmt(ox["none"]), fmt(ox["layer"]), fmt(ox["row"]), fmt(ll["none"]),
                fmt(ll["layer"]), fmt(ll["row"]), ratio(best_ox, best_ll), ratio(ox["row"], ox["none"])))
    print()
    print("by rows, tg128: one-shot sums (the default) | NCCL's all-reduce | no CUDA graphs |"
          " two processes (pp512 / tg128)")
    for m in models:
        print("%s: %s | %s | %s | %s / %s" % (
            m, fmt(mean("ox-%s-row-[0-9].json" % m, "tg128")), fmt(mean("oxn-%s-row.json" % m, "tg128")),
            fmt(mean("oxg-%s-row.json" % m, "tg128")), fmt(mean("ox-%s-row2p-1.json" % m, "pp512")),
            fmt(mean("ox-%s-row2p-1.json" % m, "tg128"))))
    print()
    print("aggregate decode, t/s: oxidize --batch B (-p 0 -n 128) against llama-batched-bench S_TG"
          " (-npp 128 -ntg 128; llama.cpp's row is -sm tensor)")
    print("| model | -sm | B | oxidize | llama.cpp | ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for path in sorted(glob.glob(os.path.join(LOG, "oxb-*.json"))):
        m, sm = re.match(r"oxb-(.*)-(none|layer|row)\.json", os.path.basename(path)).groups()
        ll = llama_batched(os.path.join(LOG, "llb-%s-%s.txt" % (m, sm)))
        for r in runs(os.path.basename(path)):
            b = r.get("n_parallel", 1)
            print("| %s | %s | %d | %.0f | %s | %s |" % (m, sm, b, r["avg_ts"], fmt(ll.get(b), "%.0f"),
                                                        ratio(r["avg_ts"], ll.get(b))))


main()
