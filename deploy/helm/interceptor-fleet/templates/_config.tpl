{{/* Environment variable carrying an extra interceptor's own token (for ${VAR} in the config). */}}
{{- define "fleet.extraTokenEnv" -}}
{{- printf "FLEET_EXTRA_TOKEN_%s" (.name | upper | replace "-" "_") -}}
{{- end -}}

{{/* Whether an interceptors.extra entry has its own token. */}}
{{- define "fleet.extraHasToken" -}}
{{- if or .token (and .tokenSecretRef .tokenSecretRef.name) -}}true{{- end -}}
{{- end -}}

{{/* Secret key reference of an extra interceptor's own token: dict "root" $ "extra" . */}}
{{- define "fleet.extraTokenRef" -}}
{{- if .extra.token -}}
name: {{ include "fleet.fullname" .root }}-interceptor-tokens
key: {{ .extra.name }}
{{- else -}}
name: {{ .extra.tokenSecretRef.name }}
key: {{ .extra.tokenSecretRef.key | default "token" }}
{{- end -}}
{{- end -}}

{{/*
The orchestrator config file (FLEET_CONFIG): the values' orchestrator.config plus the in-cluster
interceptor services and interceptors.extra (registered at start, `source: config`), the chart's
own Service names as allowed Host headers, and the audit queue. Tokens are ${VAR} references,
expanded by the orchestrator from its environment (the Secret); no secret value is rendered.
*/}}
{{- define "fleet.orchestratorConfig" -}}
{{- $root := . -}}
{{- $config := deepCopy .Values.orchestrator.config -}}
{{- $interceptors := list -}}
{{- $keys := dict "pii-redactor" "piiRedactor" "policy-validator" "policyValidator" "audit-logger" "auditLogger" -}}
{{- range $component := list "pii-redactor" "policy-validator" "audit-logger" -}}
{{- $v := index $root.Values (index $keys $component) -}}
{{- if $v.enabled -}}
{{- $entry := dict "url" (printf "%s/mcp" (include "fleet.serviceUrl" (dict "root" $root "component" $component "port" $v.service.port))) "token" "${FLEET_TOKEN}" -}}
{{- if $v.overrides }}{{- $_ := set $entry "overrides" $v.overrides -}}{{- end -}}
{{- $interceptors = append $interceptors $entry -}}
{{- end -}}
{{- end -}}
{{- range .Values.interceptors.extra -}}
{{- $token := "${FLEET_TOKEN}" -}}
{{- if include "fleet.extraHasToken" . -}}
{{- $token = printf "${%s}" (include "fleet.extraTokenEnv" .) -}}
{{- end -}}
{{- $entry := dict "url" (printf "%s/mcp" (include "fleet.serviceUrl" (dict "root" $root "component" .name "port" .port))) "token" $token -}}
{{- if .overrides }}{{- $_ := set $entry "overrides" .overrides -}}{{- end -}}
{{- $interceptors = append $interceptors $entry -}}
{{- end -}}
{{- $_ := set $config "interceptors" $interceptors -}}
{{- $audit := merge (dict "queue" .Values.audit.queue) ($config.audit | default dict) -}}
{{- $_ := set $config "audit" $audit -}}
{{- $svc := include "fleet.componentName" (dict "root" . "component" "orchestrator") -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) -}}
{{- if .Values.orchestrator.ingress.enabled -}}
{{- $hosts = concat $hosts .Values.orchestrator.ingress.hosts -}}
{{- end -}}
{{- $security := deepCopy ($config.security | default dict) -}}
{{- $_ := set $security "allowedHosts" (concat $hosts ($security.allowedHosts | default list) | uniq) -}}
{{- $_ := set $config "security" $security -}}
{{- /* jwt auth behind an Ingress with one host: the OAuth resource is that host's /mcp. */ -}}
{{- $auth := $config.auth | default dict -}}
{{- $ing := .Values.orchestrator.ingress -}}
{{- if and (eq ($auth.mode | default "") "jwt") (not $auth.resource) $ing.enabled (eq (len $ing.hosts) 1) -}}
{{- $host := first $ing.hosts -}}
{{- $scheme := "http" -}}
{{- range $ing.tls }}{{- if has $host (.hosts | default list) }}{{- $scheme = "https" -}}{{- end }}{{- end -}}
{{- $_ := set $auth "resource" (printf "%s://%s/mcp" $scheme $host) -}}
{{- $_ := set $config "auth" $auth -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}
