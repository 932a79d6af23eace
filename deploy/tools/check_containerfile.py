#!/usr/bin/env python3
"""Structural lint for the top-level Containerfile, for machines without a
container engine.

Checks: every instruction is known; stages are named uniquely and
COPY --from refers to an earlier stage; every COPY/ADD source from the build
context exists in the repository and is not excluded by .dockerignore; the
build runs `cargo build --release --locked`; the final stage runs as a
non-root numeric USER, EXPOSEs 9949 and has exec-form (JSON) ENTRYPOINT and
CMD; base images are pinned to a tag.

  check_containerfile.py CONTAINERFILE [--context DIR] [--ignore-file FILE]
"""
import argparse
import fnmatch
import json
import os
import shlex
import sys

KNOWN = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
         "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def instructions(text):
    """Yield (line_number, INSTRUCTION, rest) with continuations joined."""
    buf, start = "", None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue
        if start is None:
            start = n
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        word, _, rest = buf.partition(" ")
        yield start, word.upper(), rest.strip()
        buf, start = "", None
    if buf:
        word, _, rest = buf.partition(" ")
        yield start, word.upper(), rest.strip()


def ignored(path, patterns):
    """.dockerignore semantics, simplified: last matching pattern wins, `!`
    re-includes, `**/` matches any depth, a match on a parent excludes the
    children."""
    parts = path.split("/")
    result = False
    for pat in patterns:
        neg = pat.startswith("!")
        p = pat[1:] if neg else pat
        p = p.strip("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if fnmatch.fnmatchcase(prefix, p) or (p.startswith("**/") and fnmatch.fnmatchcase(prefix, p[3:])) \
                    or (p.startswith("**/") and fnmatch.fnmatchcase(parts[i - 1], p[3:])):
                result = not neg
                break
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("containerfile")
    ap.add_argument("--context", default=".")
    ap.add_argument("--ignore-file", default=".dockerignore")
    args = ap.parse_args()
    problems = []

    def bad(n, msg):
        problems.append(f"{args.containerfile}:{n}: {msg}")

    patterns = []
    if os.path.exists(args.ignore_file):
        with open(args.ignore_file, encoding="utf-8") as f:
            patterns = [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]

    with open(args.containerfile, encoding="utf-8") as f:
        text = f.read()
    stages, final = [], None
    seen_locked_build = False
    for n, ins, rest in instructions(text):
        if ins not in KNOWN:
            bad(n, f"unknown instruction {ins}")
            continue
        if ins == "FROM":
            words = rest.split()
            image = words[0]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            if name and name in [s["name"] for s in stages]:
                bad(n, f"stage name {name!r} used twice")
            if ":" not in image.split("/")[-1] and "@" not in image and image not in [s["name"] for s in stages]:
                bad(n, f"base image {image!r} has no tag")
            final = {"name": name, "image": image, "user": None, "expose": [], "entrypoint": None, "cmd": None, "line": n}
            stages.append(final)
            continue
        if final is None:
            if ins != "ARG":
                bad(n, f"{ins} before the first FROM")
            continue
        if ins in ("COPY", "ADD"):
            if rest.startswith("["):
                words = json.loads(rest)
            else:
                words = shlex.split(rest)
            flags = [w for w in words if w.startswith("--")]
            paths = [w for w in words if not w.startswith("--")]
            if len(paths) < 2:
                bad(n, f"{ins} needs a source and a destination")
                continue
            src_stage = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
            if src_stage is not None:
                earlier = [s["name"] for s in stages[:-1]]
                if src_stage not in earlier:
                    bad(n, f"--from={src_stage} is not an earlier stage ({earlier})")
                continue
            for src in paths[:-1]:
                if src == ".":
                    continue
                full = os.path.join(args.context, src)
                if not os.path.exists(full):
                    bad(n, f"{ins} source {src!r} does not exist in the build context")
                elif ignored(os.path.normpath(src), patterns):
                    bad(n, f"{ins} source {src!r} is excluded by {args.ignore_file}")
        elif ins == "RUN":
            if "cargo build" in rest and "--locked" in rest and "--release" in rest:
                seen_locked_build = True
        elif ins == "USER":
            final["user"] = rest
        elif ins == "EXPOSE":
            final["expose"].extend(rest.split())
        elif ins in ("ENTRYPOINT", "CMD"):
            try:
                value = json.loads(rest)
                if not isinstance(value, list):
                    raise ValueError
            except ValueError:
                bad(n, f"{ins} must be in exec (JSON array) form")
                value = None
            final["entrypoint" if ins == "ENTRYPOINT" else "cmd"] = value

    if not stages:
        problems.append(f"{args.containerfile}: no FROM")
    else:
        if len(stages) < 2:
            bad(final["line"], "expected a multi-stage build")
        if not seen_locked_build:
            problems.append(f"{args.containerfile}: no `cargo build --release --locked` step")
        user = (final["user"] or "").split(":")[0]
        if not user.isdigit() or user == "0":
            bad(final["line"], f"final stage must set a numeric non-root USER, has {final['user']!r}")
        if "9949" not in [e.split("/")[0] for e in final["expose"]]:
            bad(final["line"], "final stage does not EXPOSE 9949")
        ep = final["entrypoint"]
        if not ep or not ep[0].endswith("assertwatch"):
            bad(final["line"], f"ENTRYPOINT should run the assertwatch binary, is {ep!r}")
        if (ep or [])[1:2] != ["run"] and (final["cmd"] or [])[:1] != ["run"]:
            bad(final["line"], "neither ENTRYPOINT nor CMD runs `run`")
        full = (ep or []) + (final["cmd"] or [])
        if "--config" not in full or full[full.index("--config") + 1:][:1] != ["/etc/assertwatch/assertwatch.yaml"]:
            bad(final["line"], "the default command does not use /etc/assertwatch/assertwatch.yaml")

    for p in problems:
        print(p)
    print(f"{len(stages)} stages, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
