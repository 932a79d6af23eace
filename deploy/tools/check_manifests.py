#!/usr/bin/env python3
"""Check rendered Kubernetes manifests (kustomize or helm output) against
what assertwatch needs and promises.

kubernetes-validate checks the core kinds against the API schemas; this
script checks what a schema cannot: least-privilege RBAC, the DaemonSet's
mounts, probes and security context, that Service, ServiceMonitor and pods
select each other, the daemon config inside the ConfigMap, and the two CRD
kinds (ServiceMonitor, PrometheusRule) for which no schema ships offline.

  check_manifests.py RENDERED.yaml [--config-out FILE]

--config-out writes the daemon config from the ConfigMap, for
`assertwatch check-config`. Exit status 1 on any problem.
"""
import argparse
import sys

import yaml


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rendered")
    ap.add_argument("--config-out")
    args = ap.parse_args()
    problems = []

    def bad(msg):
        problems.append(f"{args.rendered}: {msg}")

    with open(args.rendered, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d.get("kind"), []).append(d)

    def one(kind):
        items = by_kind.get(kind, [])
        if len(items) != 1:
            bad(f"expected exactly one {kind}, found {len(items)}")
            return None
        return items[0]

    sa, role, binding = one("ServiceAccount"), one("ClusterRole"), one("ClusterRoleBinding")
    cm, ds, svc = one("ConfigMap"), one("DaemonSet"), one("Service")
    smon, prule = one("ServiceMonitor"), one("PrometheusRule")
    if None in (sa, role, binding, cm, ds, svc):
        for p in problems:
            print(p)
        return 1

    # RBAC: read pods, nothing else.
    rules = role.get("rules", [])
    if len(rules) != 1:
        bad(f"ClusterRole must have exactly one rule, has {len(rules)}")
    for r in rules:
        if r.get("apiGroups") != [""] or r.get("resources") != ["pods"]:
            bad(f"ClusterRole rule grants more than core pods: {r}")
        if not set(r.get("verbs", [])) <= {"get", "list", "watch"}:
            bad(f"ClusterRole verbs beyond get/list/watch: {r.get('verbs')}")
        if r.get("resourceNames") or r.get("nonResourceURLs"):
            bad("ClusterRole rule has resourceNames or nonResourceURLs")
    if binding["roleRef"].get("name") != role["metadata"]["name"] or binding["roleRef"].get("kind") != "ClusterRole":
        bad("ClusterRoleBinding does not reference the ClusterRole")
    subj = binding.get("subjects", [])
    if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa["metadata"]["name"]
               and s.get("namespace") == sa["metadata"].get("namespace") for s in subj):
        bad("ClusterRoleBinding does not bind the ServiceAccount")

    # DaemonSet.
    spec = ds["spec"]
    pod = spec["template"]["spec"]
    pod_labels = spec["template"]["metadata"].get("labels", {})
    sel = spec["selector"].get("matchLabels", {})
    if not sel or any(pod_labels.get(k) != v for k, v in sel.items()):
        bad("DaemonSet selector does not match its pod labels")
    if pod.get("serviceAccountName") != sa["metadata"]["name"]:
        bad("DaemonSet does not run as the ServiceAccount")
    if pod.get("nodeSelector", {}).get("nvidia.com/gpu.present") != "true":
        bad('DaemonSet nodeSelector lacks nvidia.com/gpu.present: "true"')
    if not any(t.get("key") == "nvidia.com/gpu" and t.get("effect") == "NoSchedule" for t in pod.get("tolerations", [])):
        bad("DaemonSet does not tolerate the nvidia.com/gpu NoSchedule taint")
    us = spec.get("updateStrategy", {})
    if us.get("type") != "RollingUpdate" or us.get("rollingUpdate", {}).get("maxUnavailable") != "10%":
        bad("DaemonSet updateStrategy is not RollingUpdate with maxUnavailable 10%")
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            bad(f"DaemonSet sets {flag}")
    containers = pod.get("containers", [])
    if len(containers) != 1:
        bad(f"expected one container, found {len(containers)}")
    c = containers[0]
    sc = c.get("securityContext", {})
    if sc.get("readOnlyRootFilesystem") is not True:
        bad("container root file system is not read-only")
    privileged = sc.get("privileged") is True
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    if privileged:
        if "/dev/kmsg" not in mounts:
            bad("privileged container without a /dev/kmsg mount: privilege is for the kernel log only")
    else:
        if sc.get("allowPrivilegeEscalation") is not False:
            bad("unprivileged container must set allowPrivilegeEscalation: false")
        if "ALL" not in sc.get("capabilities", {}).get("drop", []):
            bad("unprivileged container must drop ALL capabilities")
        if "/dev/kmsg" in mounts:
            bad("/dev/kmsg mounted into an unprivileged container: the device cgroup blocks it")
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    if "metrics" not in ports:
        bad("container has no port named metrics")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        http = c.get(probe, {}).get("httpGet", {})
        if http.get("path") != path or http.get("port") not in ("metrics", ports.get("metrics")):
            bad(f"{probe} is not GET {path} on the metrics port")
    res = c.get("resources", {})
    for kind in ("requests", "limits"):
        if not {"cpu", "memory"} <= set(res.get(kind, {})):
            bad(f"container resources.{kind} must set cpu and memory")
    env = {e["name"]: e for e in c.get("env", [])}
    if env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
        bad("NODE_NAME is not taken from spec.nodeName")

    expect_mounts = {
        "/var/log/pods": (True, "Directory"),
        "/var/log/containers": (True, None),
        "/var/lib/assertwatch": (False, "DirectoryOrCreate"),
        "/var/lib/assertwatch-debug": (True, None),
    }
    if privileged:
        expect_mounts["/dev/kmsg"] = (True, "CharDevice")
    for path, (ro, htype) in expect_mounts.items():
        m = mounts.get(path)
        if m is None:
            bad(f"no volume mounted at {path}")
            continue
        if bool(m.get("readOnly")) != ro:
            bad(f"{path} should be mounted {'read-only' if ro else 'read-write'}")
        vol = volumes.get(m["name"], {})
        hp = vol.get("hostPath")
        if hp is None:
            bad(f"{path}: volume {m['name']} is not a hostPath")
        elif htype and hp.get("type") != htype:
            bad(f"{path}: hostPath type {hp.get('type')!r}, want {htype!r}")
    cfg_mount = mounts.get("/etc/assertwatch")
    cfg_vol = volumes.get(cfg_mount["name"], {}) if cfg_mount else {}
    if cfg_vol.get("configMap", {}).get("name") != cm["metadata"]["name"]:
        bad("/etc/assertwatch is not the ConfigMap")
    if c.get("args", [])[:3] != ["run", "--config", "/etc/assertwatch/assertwatch.yaml"]:
        bad("container args are not `run --config /etc/assertwatch/assertwatch.yaml`")

    # The daemon config.
    text = cm.get("data", {}).get("assertwatch.yaml")
    if text is None:
        bad("ConfigMap has no assertwatch.yaml")
        cfg = {}
    else:
        cfg = yaml.safe_load(text)
        if args.config_out:
            with open(args.config_out, "w", encoding="utf-8") as f:
                f.write(text)
    if cfg.get("listen") != f"0.0.0.0:{ports.get('metrics')}":
        bad(f"config listen {cfg.get('listen')!r} is not 0.0.0.0 on the container port")
    if cfg.get("state_dir") != "/var/lib/assertwatch":
        bad("config state_dir is not /var/lib/assertwatch")
    if not any("/var/log/pods/*/*/*.log" in s.get("paths", []) and s.get("format") == "cri" for s in cfg.get("logs", [])):
        bad("config does not read /var/log/pods/*/*/*.log as cri")
    if cfg.get("gpu", {}).get("backend") != "nvml":
        bad("config gpu.backend is not nvml")
    kmsg = cfg.get("kernel_log", {}).get("path") == "/dev/kmsg"
    if kmsg != privileged:
        bad("config kernel_log must be /dev/kmsg exactly when the container is privileged")

    # Service.
    if svc["spec"].get("clusterIP") != "None":
        bad("Service is not headless")
    svc_ports = {p.get("name"): p for p in svc["spec"].get("ports", [])}
    if svc_ports.get("metrics", {}).get("port") != 9949:
        bad("Service has no port metrics/9949")
    if any(pod_labels.get(k) != v for k, v in svc["spec"].get("selector", {}).items()) or not svc["spec"].get("selector"):
        bad("Service selector does not match the DaemonSet's pods")

    # ServiceMonitor (CRD: structural checks).
    if smon is not None:
        if smon.get("apiVersion") != "monitoring.coreos.com/v1":
            bad(f"ServiceMonitor apiVersion {smon.get('apiVersion')!r}")
        ms = smon["spec"].get("selector", {}).get("matchLabels", {})
        svc_labels = svc["metadata"].get("labels", {})
        if not ms or any(svc_labels.get(k) != v for k, v in ms.items()):
            bad("ServiceMonitor selector does not match the Service labels")
        if smon["metadata"].get("namespace") != svc["metadata"].get("namespace") and not smon["spec"].get("namespaceSelector"):
            bad("ServiceMonitor is in another namespace than the Service and has no namespaceSelector")
        eps = smon["spec"].get("endpoints", [])
        if not eps:
            bad("ServiceMonitor has no endpoints")
        for ep in eps:
            if ep.get("port") not in svc_ports:
                bad(f"ServiceMonitor endpoint port {ep.get('port')!r} is not a Service port name")
            if ep.get("path", "/metrics") != "/metrics":
                bad("ServiceMonitor endpoint path is not /metrics")
            if not any(r.get("sourceLabels") == ["__meta_kubernetes_pod_node_name"] and r.get("targetLabel") == "node"
                       for r in ep.get("relabelings", [])):
                bad("ServiceMonitor endpoint does not relabel __meta_kubernetes_pod_node_name to node")
            unknown = set(ep) - {"port", "path", "interval", "scrapeTimeout", "relabelings",
                                 "metricRelabelings", "scheme", "honorLabels", "tlsConfig"}
            if unknown:
                bad(f"ServiceMonitor endpoint has unexpected keys {sorted(unknown)}")

    # PrometheusRule (CRD: structural checks).
    if prule is not None:
        if prule.get("apiVersion") != "monitoring.coreos.com/v1":
            bad(f"PrometheusRule apiVersion {prule.get('apiVersion')!r}")
        groups = prule.get("spec", {}).get("groups", [])
        if not groups:
            bad("PrometheusRule has no groups")
        for g in groups:
            if not g.get("name") or not g.get("rules"):
                bad(f"PrometheusRule group {g.get('name')!r} needs a name and rules")
            for r in g.get("rules", []):
                if not (("alert" in r) ^ ("record" in r)) or not r.get("expr"):
                    bad(f"PrometheusRule rule {r.get('alert') or r.get('record')!r} needs alert or record, and expr")

    for p in problems:
        print(p)
    print(f"{len(docs)} objects checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
