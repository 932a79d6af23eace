#!/usr/bin/env python3
"""Check that every assertwatch_* metric the rules and dashboards query is
defined in docs/metrics.md, the metric contract. Catches a renamed metric
before it turns into an empty panel or an alert that can never fire.

  check_metric_names.py --contract docs/metrics.md FILE...
"""
import argparse
import re
import sys

NAME = re.compile(r"\bassertwatch_[a-z0-9_]+")


def contract_names(path):
    names, histograms = set(), set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            first = cells[0]
            found = NAME.findall(first)
            names.update(found)
            # Shorthand `assertwatch_gpu_memory_used_bytes` / `_free_bytes`: the
            # suffix replaces the last two words of the first name.
            if found:
                stem = "_".join(found[0].split("_")[:-2])
                for suffix in re.findall(r"`(_[a-z0-9_]+)`", first):
                    names.add(stem + suffix)
            if len(cells) > 1 and "histogram" in cells[1]:
                histograms.update(found)
    return names, histograms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--contract", required=True)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    names, histograms = contract_names(args.contract)
    problems, used = [], set()
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for name in sorted(set(NAME.findall(text))):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name in names or (base in histograms and base != name):
                used.add(base if base in histograms else name)
                continue
            problems.append(f"{path}: {name} is not in {args.contract}")
    for p in problems:
        print(p)
    print(f"{len(names)} metrics in the contract, {len(used)} used, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
