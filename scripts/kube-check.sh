#!/usr/bin/env bash
# Run assertwatch's Kubernetes flow against a real cluster and print each
# step: the service account's permissions, a replay pod derived from a
# running pod by `assertwatch kube replay-pod`, created, watched to its end,
# its log read and deleted, and an Event on the pod. Not run in CI (no API
# server there); see docs/deploy-kubernetes.md#checking-against-a-real-cluster.
#
#   KUBECONFIG=~/.kube/kind scripts/kube-check.sh
#
# Environment:
#   KUBECONFIG       the cluster (kind, k3s, a GPU cluster); required
#   MODE             cpu (default), sync-gpu or sanitizer (needs a GPU node)
#   IMAGE            the "job" image (default python:3.12-slim); replays
#                    really run only in an image with the assertwatch_replay
#                    package, elsewhere the replay pod ends with the
#                    harness's import error, which still checks the flow
#   PVC              a PersistentVolumeClaim in NAMESPACE for the step
#                    directory (default: an emptyDir, which the replay pod
#                    sees empty: mechanics only)
#   NAMESPACE        namespace to use (default: a new assertwatch-check-*,
#                    deleted at the end)
#   SA               service account whose permissions are listed
#                    (default assertwatch:assertwatch)
#   NODE_CONDITION=1 also set and clear the GPUHardwareFault condition on
#                    the job's node (writes to a real node; off by default)
#   ASSERTWATCH_BIN  the binary (default target/release, else target/debug)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KUBECTL="${KUBECTL:-kubectl}"
MODE="${MODE:-cpu}"
IMAGE="${IMAGE:-python:3.12-slim}"
SA="${SA:-assertwatch:assertwatch}"
BIN="${ASSERTWATCH_BIN:-}"
if [[ -z "$BIN" ]]; then
  for b in "$root/target/release/assertwatch" "$root/target/debug/assertwatch"; do
    if [[ -x "$b" ]]; then BIN="$b"; break; fi
  done
fi

step() { printf '\n== %s\n' "$*"; }
ok() { printf '   ok: %s\n' "$*"; }
die() { printf '   FAILED: %s\n' "$*" >&2; exit 1; }

[[ -n "${KUBECONFIG:-}" ]] || die "set KUBECONFIG to the cluster to check"
command -v "$KUBECTL" >/dev/null || die "kubectl not found"
[[ -n "$BIN" && -x "$BIN" ]] || die "no assertwatch binary (cargo build, or set ASSERTWATCH_BIN)"

tmp="$(mktemp -d)"
created_ns=""
cleanup() {
  if [[ -n "$created_ns" ]]; then
    "$KUBECTL" delete namespace "$created_ns" --wait=false >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

step "cluster"
"$KUBECTL" version 2>/dev/null | sed 's/^/   /' || die "cannot reach the API server"
"$KUBECTL" config current-context | sed 's/^/   context: /'

if [[ -z "${NAMESPACE:-}" ]]; then
  NAMESPACE="assertwatch-check-$(date +%s)"
  "$KUBECTL" create namespace "$NAMESPACE" >/dev/null
  created_ns="$NAMESPACE"
fi
ok "namespace $NAMESPACE"

step "permissions of serviceaccount $SA (docs: Kubernetes API permissions)"
as="system:serviceaccount:${SA%%:*}:${SA##*:}"
while read -r verb resource scope; do
  ns_flag=()
  if [[ "$scope" == ns ]]; then ns_flag=(-n "$NAMESPACE"); fi
  answer="$("$KUBECTL" auth can-i "$verb" "$resource" "${ns_flag[@]}" --as "$as" 2>/dev/null || true)"
  printf '   %-7s %-20s %-10s %s\n' "$verb" "$resource" "${scope/ns/$NAMESPACE}" "${answer:-no}"
done <<'EOF'
get pods cluster
list pods cluster
watch pods cluster
create events.events.k8s.io ns
patch events.events.k8s.io ns
get nodes cluster
patch nodes/status cluster
create pods ns
delete pods ns
get pods/log ns
EOF
printf '   (replay rows say "no" until the namespace is bound, see replay-namespace/)\n'

step "a job pod that leaves a step directory"
if [[ -n "${PVC:-}" ]]; then
  volume="{\"name\": \"debug\", \"persistentVolumeClaim\": {\"claimName\": \"$PVC\"}}"
else
  volume='{"name": "debug", "emptyDir": {}}'
fi
gpu_limits=""
if [[ "$MODE" != cpu ]]; then gpu_limits='"resources": {"limits": {"nvidia.com/gpu": "1"}},'; fi
cat >"$tmp/job.json" <<EOF
{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "check-job", "namespace": "$NAMESPACE"},
  "spec": {
    "restartPolicy": "Never",
    "containers": [{
      "name": "job", "image": "$IMAGE", $gpu_limits
      "command": ["sh", "-c", "mkdir -p /debug/check/step-000001 && echo '{}' > /debug/check/step-000001/manifest.json && sleep 600"],
      "volumeMounts": [{"name": "debug", "mountPath": "/debug"}]
    }],
    "volumes": [$volume]
  }
}
EOF
"$KUBECTL" apply -f "$tmp/job.json" >/dev/null
"$KUBECTL" -n "$NAMESPACE" wait --for=condition=Ready pod/check-job --timeout=180s >/dev/null \
  || die "the job pod did not start (image pull? GPU?)"
node="$("$KUBECTL" -n "$NAMESPACE" get pod check-job -o jsonpath='{.spec.nodeName}')"
ok "check-job running on $node"

step "assertwatch kube replay-pod (mode $MODE)"
"$KUBECTL" -n "$NAMESPACE" get pod check-job -o yaml >"$tmp/pod.yaml"
if ! "$BIN" kube replay-pod --pod "$tmp/pod.yaml" --container job \
    --manifest-path /debug/check/step-000001/manifest.json --mode "$MODE" \
    --timeout 5m --incident check-1 >"$tmp/replay.yaml" 2>"$tmp/replay.err"; then
  cat "$tmp/replay.err" >&2
  die "replay-pod refused"
fi
sed 's/^/   /' "$tmp/replay.err"
replay="$(sed -n 's/^  name: //p' "$tmp/replay.yaml" | head -n 1)"
ok "derived $replay (image $(sed -n 's/^    image: //p' "$tmp/replay.yaml" | head -n 1))"

step "create, watch, log, delete"
"$KUBECTL" create -f "$tmp/replay.yaml" >/dev/null
ok "created"
phase=""
for _ in $(seq 1 120); do
  phase="$("$KUBECTL" -n "$NAMESPACE" get pod "$replay" -o jsonpath='{.status.phase}' 2>/dev/null || true)"
  case "$phase" in Succeeded | Failed) break ;; esac
  sleep 5
done
ok "phase: ${phase:-unknown}"
"$KUBECTL" -n "$NAMESPACE" logs "$replay" >"$tmp/replay.log" 2>&1 || true
printf '   last log line: %s\n' "$(tail -n 1 "$tmp/replay.log")"
"$KUBECTL" -n "$NAMESPACE" delete pod "$replay" --wait=true >/dev/null
ok "deleted"

step "an Event on the job pod"
uid="$("$KUBECTL" -n "$NAMESPACE" get pod check-job -o jsonpath='{.metadata.uid}')"
now="$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)"
cat >"$tmp/event.json" <<EOF
{
  "apiVersion": "events.k8s.io/v1", "kind": "Event",
  "metadata": {"name": "check-job.assertwatch-check", "namespace": "$NAMESPACE"},
  "eventTime": "$now", "type": "Warning", "reason": "DeviceSideAssert", "action": "Detected",
  "note": "kube-check: an Event as assertwatch writes it",
  "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "$NAMESPACE", "name": "check-job", "uid": "$uid"},
  "reportingController": "assertwatch.io/assertwatch", "reportingInstance": "assertwatch-kube-check"
}
EOF
"$KUBECTL" create -f "$tmp/event.json" >/dev/null
"$KUBECTL" -n "$NAMESPACE" get events --field-selector involvedObject.name=check-job \
  | sed 's/^/   /'

if [[ "${NODE_CONDITION:-0}" == 1 ]]; then
  step "node condition on $node (set, then clear)"
  for status in True False; do
    "$KUBECTL" patch node "$node" --subresource=status --type=strategic -p \
      "{\"status\":{\"conditions\":[{\"type\":\"GPUHardwareFault\",\"status\":\"$status\",\"reason\":\"KubeCheck\",\"message\":\"kube-check\"}]}}" >/dev/null
    ok "GPUHardwareFault=$("$KUBECTL" get node "$node" -o jsonpath='{.status.conditions[?(@.type=="GPUHardwareFault")].status}')"
  done
fi

step "done"
ok "every step ran"
