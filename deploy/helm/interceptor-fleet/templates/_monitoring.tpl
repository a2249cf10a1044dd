{{/*
Building blocks of the PrometheusRule and the Grafana dashboard.
*/}}

{{/*
The Prometheus jobs of this release: the names of the Services the ServiceMonitor scrapes
(the operator's job label is the Service name), joined with "|" for a =~ matcher.
*/}}
{{- define "fleet.metricsJobs" -}}
{{- $components := list "orchestrator" -}}
{{- if .Values.piiRedactor.enabled }}{{ $components = append $components "pii-redactor" }}{{ end -}}
{{- if .Values.policyValidator.enabled }}{{ $components = append $components "policy-validator" }}{{ end -}}
{{- if .Values.auditLogger.enabled }}{{ $components = append $components "audit-logger" }}{{ end -}}
{{- if .Values.auditWorker.enabled }}{{ $components = append $components "audit-worker" }}{{ end -}}
{{- range .Values.interceptors.extra }}{{ $components = append $components .name }}{{ end -}}
{{- $jobs := list -}}
{{- range $components }}
{{- $jobs = append $jobs (include "fleet.componentName" (dict "root" $ "component" .)) -}}
{{- end -}}
{{- join "|" $jobs -}}
{{- end -}}

{{/*
One alerting rule, unless monitoring.prometheusRule.alerts.<alert>.enabled is false; `for` and
severity from that block win over the defaults given here.
dict "root" $ "alert" "FleetX" "severity" "warning" "for" "10m" "expr" "..." "summary" "..." "description" "..."
*/}}
{{- define "fleet.alertRule" -}}
{{- $pr := .root.Values.monitoring.prometheusRule -}}
{{- $change := get ($pr.alerts | default dict) .alert | default dict -}}
{{- if not (and (hasKey $change "enabled") (not $change.enabled)) }}
- alert: {{ .alert }}
  expr: |-
    {{- .expr | trim | nindent 4 }}
  for: {{ $change.for | default .for }}
  labels:
    {{- toYaml (merge (dict "severity" ($change.severity | default .severity)) ($pr.alertLabels | default dict)) | nindent 4 }}
  annotations:
    summary: {{ .summary | quote }}
    description: {{ .description | quote }}
{{- end }}
{{- end -}}
