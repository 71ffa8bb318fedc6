#!/usr/bin/env python3
"""batched_table.py LOG: the batched-decoding table of one bench/gpu.sh run with LLAMACPP set:
per model and sequence count B, oxidize's aggregate generated tokens/s (`oxidize bench -p 0
-n 128 --batch B`, batched-NAME.json) beside llama.cpp's (`llama-batched-bench -npp 128 -ntg
128 -npl B`: its S_TG column, llama-batched-NAME.md), and the ratio."""
import glob
import json
import os
import sys


def llama_s_tg(path):
    """{B: S_TG t/s} from llama-batched-bench's markdown table."""
    rows, cols = {}, None
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "S_TG t/s" in cells and "B" in cells:
            cols = (cells.index("B"), cells.index("S_TG t/s"))
        elif cols and len(cells) > max(cols):
            try:
                rows[int(cells[cols[0]])] = float(cells[cols[1]])
            except ValueError:
                pass
    return rows


def main():
    log = sys.argv[1]
    print("| model | B | oxidize t/s | llama.cpp t/s | ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for path in sorted(glob.glob(os.path.join(log, "batched-*.json"))):
        name = os.path.basename(path)[len("batched-"):-len(".json")]
        try:
            ours = {r["n_parallel"]: r["avg_ts"] for r in json.load(open(path))}
        except (ValueError, KeyError):
            print("| %s | - | (no oxidize result) | | |" % name)
            continue
        theirs_path = os.path.join(log, "llama-batched-%s.md" % name)
        theirs = llama_s_tg(theirs_path) if os.path.exists(theirs_path) else {}
        for b in sorted(set(ours) | set(theirs)):
            o, t = ours.get(b), theirs.get(b)
            print("| %s | %d | %s | %s | %s |" % (
                name, b, "%.1f" % o if o else "-", "%.1f" % t if t else "-",
                "%.2f" % (o / t) if o and t else "-"))


if __name__ == "__main__":
    main()
