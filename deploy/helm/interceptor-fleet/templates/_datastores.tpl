{{/* Security settings of the in-chart Redis and PostgreSQL (uid/gid 999 in both official images). */}}
{{- define "fleet.datastorePodSecurityContext" -}}
runAsNonRoot: true
runAsUser: 999
runAsGroup: 999
fsGroup: 999
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "fleet.datastoreContainerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 999
runAsGroup: 999
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* A single-node topology spread (one replica; keeps the rule uniform across workloads). */}}
{{- define "fleet.datastoreSpread" -}}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "fleet.componentSelectorLabels" . | nindent 6 }}
{{- end -}}

{{/* volumeClaimTemplates entry: dict "persistence" .Values.x.persistence */}}
{{- define "fleet.datastoreClaim" -}}
- metadata:
    name: data
  spec:
    accessModes: [ReadWriteOnce]
    {{- with .persistence.storageClass }}
    storageClassName: {{ . | quote }}
    {{- end }}
    resources:
      requests:
        storage: {{ .persistence.size }}
{{- end -}}
