#!/usr/bin/env python3
"""House rules for the alert rules that promtool does not check.

- every alerting rule has `for:`, a `severity` label (critical, warning or
  info), and `summary`, `description` and `runbook_url` annotations;
- every runbook_url points at docs/runbooks.md and its anchor is a section
  heading there, and every section there belongs to an alert (a rule, or one
  of the alerts the daemon pushes itself, which need a section too);
- every alert has at least one promtool test case where it fires and one
  where it must not (exp_alerts: []);
- the PrometheusRule (and any other wrappers given with --wrapped) carry
  exactly the plain rules file as their spec.

Prints one line per problem and a summary; exit status 1 on any problem.
"""
import argparse
import re
import sys

import yaml

SEVERITIES = {"critical", "warning", "info"}
RUNBOOK_PREFIX = "https://github.com/assertwatch/assertwatch/blob/main/docs/runbooks.md#"
# Alerts the daemon pushes to Alertmanager (not Prometheus rules); their
# runbook_url anchors are the lower-cased alert names.
PUSHED = ["CudaDeviceSideAssert", "CudaError", "CudaOutOfMemory", "NcclError",
          "TrainingNumericError", "GpuXidApplication", "GpuXidHardware", "GpuXidDriver", "NvSwitchSxid"]


def github_anchor(heading):
    a = heading.strip().lower()
    a = re.sub(r"[^\w\- ]", "", a)
    return a.replace(" ", "-")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rules", required=True)
    ap.add_argument("--runbooks", required=True)
    ap.add_argument("--tests", nargs="+", required=True)
    ap.add_argument("--wrapped", nargs="*", default=[], help="PrometheusRule manifests whose spec must equal --rules")
    args = ap.parse_args()
    problems = []

    with open(args.rules, encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    alerts = {}
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            if "alert" not in rule:
                continue
            name = rule["alert"]
            if name in alerts:
                problems.append(f"{name}: defined twice")
            alerts[name] = rule
            if "for" not in rule:
                problems.append(f"{name}: no `for:`")
            sev = rule.get("labels", {}).get("severity")
            if sev not in SEVERITIES:
                problems.append(f"{name}: severity label {sev!r} is not one of {sorted(SEVERITIES)}")
            ann = rule.get("annotations", {})
            for key in ("summary", "description", "runbook_url"):
                if not ann.get(key):
                    problems.append(f"{name}: no {key} annotation")

    with open(args.runbooks, encoding="utf-8") as f:
        headings = re.findall(r"^## (.+)$", f.read(), re.M)
    anchors = {github_anchor(h): h for h in headings}
    used = set()
    for name, rule in alerts.items():
        url = rule.get("annotations", {}).get("runbook_url", "")
        if not url.startswith(RUNBOOK_PREFIX):
            problems.append(f"{name}: runbook_url {url!r} does not start with {RUNBOOK_PREFIX}")
            continue
        anchor = url[len(RUNBOOK_PREFIX):]
        if anchor not in anchors:
            problems.append(f"{name}: runbook anchor #{anchor} has no section in {args.runbooks}")
        used.add(anchor)
    for name in PUSHED:
        if name in alerts:
            problems.append(f"{name}: a rule has the name of an alert the daemon pushes")
        if name.lower() not in anchors:
            problems.append(f"{args.runbooks}: no section for the pushed alert {name}")
        used.add(name.lower())
    for anchor, heading in anchors.items():
        if anchor not in used:
            problems.append(f"{args.runbooks}: section {heading!r} belongs to no alert")

    fires, quiet = {}, {}
    for path in args.tests:
        with open(path, encoding="utf-8") as f:
            suite = yaml.safe_load(f)
        for test in suite.get("tests", []):
            for case in test.get("alert_rule_test", []):
                name = case.get("alertname")
                if name not in alerts:
                    problems.append(f"{path}: test for unknown alert {name!r}")
                    continue
                bucket = fires if case.get("exp_alerts") else quiet
                bucket[name] = bucket.get(name, 0) + 1
    for name in alerts:
        if not fires.get(name):
            problems.append(f"{name}: no test case where it fires")
        if not quiet.get(name):
            problems.append(f"{name}: no test case where it stays quiet")

    for path in args.wrapped:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        prs = [d for d in docs if d.get("kind") == "PrometheusRule"]
        if len(prs) != 1:
            problems.append(f"{path}: expected one PrometheusRule, found {len(prs)}")
            continue
        pr = prs[0]
        if pr.get("apiVersion") != "monitoring.coreos.com/v1":
            problems.append(f"{path}: apiVersion {pr.get('apiVersion')!r}")
        if pr.get("spec") != rules:
            problems.append(f"{path}: spec differs from {args.rules}; regenerate it")

    for p in problems:
        print(p)
    n_fire, n_quiet = sum(fires.values()), sum(quiet.values())
    print(f"{len(alerts)} rule alerts + {len(PUSHED)} pushed, {len(anchors)} runbook sections, "
          f"{n_fire} firing and {n_quiet} quiet test cases, {len(args.wrapped)} wrappers compared, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
