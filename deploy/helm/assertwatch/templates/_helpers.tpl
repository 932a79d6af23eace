{{/* Name and labels shared by every object. */}}
{{- define "assertwatch.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "assertwatch.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "assertwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "assertwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: daemon
{{- end -}}

{{- define "assertwatch.labels" -}}
{{ include "assertwatch.selectorLabels" . }}
app.kubernetes.io/part-of: assertwatch
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "assertwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "assertwatch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The daemon config; kernel_log is dropped when the kernel log is off. */}}
{{- define "assertwatch.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- if not .Values.kernelLog.enabled -}}
{{- $_ := unset $cfg "kernel_log" -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}
