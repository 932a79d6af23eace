#!/usr/bin/env python3
"""Check that relative links in the deployment docs resolve: the file
exists and, for `file.md#anchor`, the anchor is a heading of that file
(GitHub's anchor rules: lower case, punctuation dropped, spaces to dashes).
Also checks that repository paths written in backticks (`deploy/...`,
`dashboards/...`, `scripts/...`) exist.

  check_docs.py DOC.md...
"""
import os
import re
import sys


def anchors(path):
    out = set()
    with open(path, encoding="utf-8") as f:
        in_code = False
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            m = re.match(r"^#{1,6} (.+)$", line)
            if m:
                a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
                out.add(a)
    return out


def main():
    problems, links = [], 0
    root = os.getcwd()
    for doc in sys.argv[1:]:
        text = open(doc, encoding="utf-8").read()
        base = os.path.dirname(doc)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+://", target) or target.startswith("mailto:"):
                continue
            links += 1
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(base, path)) if path else doc
            if not os.path.exists(full):
                problems.append(f"{doc}: link to missing file {target}")
                continue
            if anchor and full.endswith(".md") and anchor not in anchors(full):
                problems.append(f"{doc}: link to missing anchor {target}")
        for path in re.findall(r"`((?:deploy|dashboards|scripts|config)/[^`\s*]+)`", text):
            links += 1
            if not os.path.exists(os.path.join(root, path)):
                problems.append(f"{doc}: names missing path {path}")
    for p in problems:
        print(p)
    print(f"{len(sys.argv) - 1} documents, {links} links and paths, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
