#!/usr/bin/env python3
"""Check the Grafana dashboards under dashboards/.

Structural checks (JSON parses, schemaVersion, variables, units, gridPos, unique
ids) run here. Every PromQL expression (panel targets, annotation queries, the
metric selector inside label_values() variables) is written, with Grafana's
template variables replaced by concrete values, into a recording-rules file
under --rules-out, so that `promtool check rules` can parse them all.

@grafana/schema on npm ships TypeScript types only, no JSON Schema, so the
structure is checked by hand here.

Exit status: 0 if every check passed, 1 otherwise. Prints one line per problem.
"""
import argparse
import json
import re
import sys

# Concrete stand-ins for Grafana's template variables; any value that keeps
# the expression valid PromQL will do.
SUBSTITUTIONS = [
    ("${datasource}", "prometheus"),
    ("$datasource", "prometheus"),
    ("${node}", "gpu-node-1"),
    ("$node", "gpu-node-1"),
    ("${gpu}", "0"),
    ("$gpu", "0"),
    ("$__rate_interval", "2m"),
    ("$__interval", "30s"),
    ("$__range", "6h"),
]
REQUIRED_VARIABLES = {"datasource": "datasource", "node": "query", "gpu": "query"}
ALLOWED_UNITS = {
    "percentunit", "bytes", "celsius", "watt", "hertz", "s", "short", "none", "ops", "cps",
    "Bps", "bool_on_off",
}
MIN_SCHEMA_VERSION = 39


def substitute(expr):
    for var, value in SUBSTITUTIONS:
        expr = expr.replace(var, value)
    leftover = re.search(r"\$\{?\w+", expr)
    return expr, (leftover.group(0) if leftover else None)


def check(path, problems, exprs):
    def bad(msg):
        problems.append(f"{path}: {msg}")

    try:
        with open(path, encoding="utf-8") as f:
            dash = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        bad(f"does not parse as JSON: {err}")
        return

    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < MIN_SCHEMA_VERSION:
        bad(f"schemaVersion must be >= {MIN_SCHEMA_VERSION}, is {dash.get('schemaVersion')!r}")
    for key in ("uid", "title", "panels", "templating", "annotations", "time"):
        if key not in dash:
            bad(f"missing top-level key {key!r}")

    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    for name, vtype in REQUIRED_VARIABLES.items():
        var = variables.get(name)
        if var is None:
            bad(f"missing template variable {name!r}")
        elif var.get("type") != vtype:
            bad(f"variable {name!r} has type {var.get('type')!r}, want {vtype!r}")
    ds = variables.get("datasource")
    if ds is not None and ds.get("query") != "prometheus":
        bad("variable 'datasource' must select prometheus data sources")
    for name, var in variables.items():
        if var.get("type") != "query":
            continue
        q = var.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", q)
        if not m:
            bad(f"variable {name!r}: expected label_values(selector, label), got {q!r}")
            continue
        exprs.append((f"{path} variable {name}", m.group(1)))

    annotations = dash.get("annotations", {}).get("list", [])
    if not any(a.get("builtIn") == 1 for a in annotations):
        bad("the built-in annotation is missing")
    prom_annotations = [a for a in annotations if a.get("expr")]
    if not prom_annotations:
        bad("no Prometheus annotation query (alerts or incidents)")
    for a in prom_annotations:
        exprs.append((f"{path} annotation {a.get('name')!r}", a["expr"]))

    placed = []
    for p in dash.get("panels", []):
        g = p.get("gridPos", {})
        if all(isinstance(g.get(k), int) for k in ("h", "w", "x", "y")):
            for q, h in placed:
                if g["x"] < h["x"] + h["w"] and h["x"] < g["x"] + g["w"] and \
                        g["y"] < h["y"] + h["h"] and h["y"] < g["y"] + g["h"]:
                    bad(f"panels {q.get('title')!r} and {p.get('title')!r} overlap")
            placed.append((p, g))

    ids = set()
    panels = list(dash.get("panels", []))
    # Collapsed rows keep their panels inside.
    for p in list(panels):
        panels.extend(p.get("panels", []))
    if not any(p.get("type") != "row" for p in panels):
        bad("no panels")
    for p in panels:
        label = f"panel {p.get('id')} {p.get('title')!r}"
        if "type" not in p:
            bad(f"{label}: no type")
        pid = p.get("id")
        if pid in ids:
            bad(f"{label}: duplicate id")
        ids.add(pid)
        grid = p.get("gridPos", {})
        if not all(isinstance(grid.get(k), int) for k in ("h", "w", "x", "y")):
            bad(f"{label}: gridPos needs integer h, w, x, y")
        elif grid["x"] + grid["w"] > 24:
            bad(f"{label}: gridPos wider than 24 columns")
        if p.get("type") == "row":
            continue
        if not p.get("title"):
            bad(f"{label}: no title")
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit")
        if not unit:
            bad(f"{label}: fieldConfig.defaults.unit is not set")
        elif unit not in ALLOWED_UNITS:
            bad(f"{label}: unit {unit!r} is not one of {sorted(ALLOWED_UNITS)}")
        ds = p.get("datasource", {})
        if ds.get("uid") != "${datasource}":
            bad(f"{label}: datasource must be ${{datasource}}, is {ds!r}")
        targets = p.get("targets")
        if not targets:
            bad(f"{label}: no targets")
            continue
        refs = set()
        for t in targets:
            if t.get("refId") in refs:
                bad(f"{label}: duplicate refId {t.get('refId')!r}")
            refs.add(t.get("refId"))
            if not t.get("expr"):
                bad(f"{label}: target {t.get('refId')} has no expr")
                continue
            if t.get("datasource", {}).get("uid") != "${datasource}":
                bad(f"{label}: target {t.get('refId')} does not use ${{datasource}}")
            exprs.append((f"{path} {label} {t.get('refId')}", t["expr"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rules-out", required=True, help="where to write the rules file for promtool")
    ap.add_argument("dashboards", nargs="+")
    args = ap.parse_args()

    problems, exprs = [], []
    for path in args.dashboards:
        check(path, problems, exprs)

    lines = ["# Generated from dashboard queries; checked with promtool check rules.",
             "groups:", "  - name: dashboard-queries", "    rules:"]
    for i, (where, expr) in enumerate(exprs):
        concrete, leftover = substitute(expr)
        if leftover:
            problems.append(f"{where}: unknown template variable {leftover} in {expr!r}")
            continue
        lines.append(f"      # {where}")
        lines.append(f"      - record: dashboard:query_{i}")
        lines.append(f"        expr: {json.dumps(concrete)}")
    with open(args.rules_out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")

    for p in problems:
        print(p)
    print(f"{len(args.dashboards)} dashboards, {len(exprs)} queries extracted, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
