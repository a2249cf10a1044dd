{{/*
Names, labels and the building blocks every workload shares.
*/}}

{{- define "fleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Resource name prefix; leaves room for the longest component suffix ("-policy-validator"). */}}
{{- define "fleet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "fleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every resource. */}}
{{- define "fleet.labels" -}}
helm.sh/chart: {{ include "fleet.chart" . }}
{{ include "fleet.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: interceptor-fleet
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "fleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* dict "root" $ "component" "orchestrator" */}}
{{- define "fleet.componentLabels" -}}
{{ include "fleet.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "fleet.componentSelectorLabels" -}}
{{ include "fleet.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "fleet.componentName" -}}
{{- printf "%s-%s" (include "fleet.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "fleet.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Checksum of the values the chart's Secret is made of, so pods roll when one changes. The values,
not the rendered Secret: generated tokens differ on every `helm template`, which would roll the
pods on every GitOps sync.
*/}}
{{- define "fleet.secretChecksum" -}}
{{- toJson (dict "secrets" .Values.secrets "redis" .Values.externalRedis "database" .Values.externalDatabase "postgresql" .Values.postgresql.auth "inChart" (list .Values.redis.enabled .Values.postgresql.enabled)) | sha256sum -}}
{{- end -}}

{{- define "fleet.secretName" -}}
{{- default (include "fleet.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* dict "root" $ "image" .Values.orchestrator.image */}}
{{- define "fleet.image" -}}
{{- $root := .root -}}
{{- $repository := .image.repository -}}
{{- if $root.Values.image.registry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" $root.Values.image.registry) $repository -}}
{{- end -}}
{{- $tag := .image.tag | default $root.Values.image.tag | default $root.Chart.AppVersion | toString -}}
{{- if .image.digest -}}
{{- printf "%s:%s@%s" $repository $tag .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{/* In-cluster URL of a component's Service: dict "root" $ "component" "pii-redactor" "port" 8081 */}}
{{- define "fleet.serviceUrl" -}}
{{- printf "http://%s.%s.svc.%s:%v" (include "fleet.componentName" .) .root.Release.Namespace .root.Values.clusterDomain .port -}}
{{- end -}}

{{/* REDIS_URL: the in-chart Redis, or the Secret. */}}
{{- define "fleet.redisEnv" -}}
{{- if .Values.redis.enabled }}
- name: REDIS_URL
  value: {{ printf "redis://%s:6379" (include "fleet.componentName" (dict "root" . "component" "redis")) | quote }}
{{- else }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "fleet.secretName" . }}
      key: REDIS_URL
{{- end }}
{{- end -}}

{{/* DATABASE_URL: the in-chart PostgreSQL (password through $(POSTGRES_PASSWORD)), or the Secret. */}}
{{- define "fleet.databaseEnv" -}}
{{- if .Values.postgresql.enabled }}
- name: POSTGRES_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "fleet.secretName" . }}
      key: POSTGRES_PASSWORD
- name: DATABASE_URL
  value: {{ printf "postgres://%s:$(POSTGRES_PASSWORD)@%s:5432/%s" .Values.postgresql.auth.username (include "fleet.componentName" (dict "root" . "component" "postgresql")) .Values.postgresql.auth.database | quote }}
{{- else }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "fleet.secretName" . }}
      key: DATABASE_URL
{{- end }}
{{- end -}}

{{/* An env var from the fleet Secret: dict "root" $ "name" "FLEET_TOKEN" */}}
{{- define "fleet.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "fleet.secretName" .root }}
      key: {{ .name }}
{{- end -}}

{{/* HOST, PORT, LOG_LEVEL and OpenTelemetry: dict "root" $ "component" "x" "port" 8080 "logLevel" "info" */}}
{{- define "fleet.commonEnv" -}}
{{- $otel := .root.Values.otel -}}
- name: HOST
  value: "0.0.0.0"
- name: PORT
  value: {{ .port | quote }}
- name: LOG_LEVEL
  value: {{ .logLevel | default "info" | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ .component | quote }}
{{- $attributes := list (printf "service.namespace=%s" .root.Release.Namespace) (printf "service.instance.id=$(POD_NAME)") -}}
{{- range $key, $value := $otel.resourceAttributes }}
{{- $attributes = append $attributes (printf "%s=%v" $key $value) -}}
{{- end }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attributes | quote }}
{{- if $otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $otel.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: http/json
{{- end }}
{{- if $otel.sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ $otel.sampler | quote }}
{{- end }}
{{- if ne (toString $otel.samplerArg) "" }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $otel.samplerArg | toString | quote }}
{{- end }}
{{- if $otel.headersSecretRef.name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ $otel.headersSecretRef.name }}
      key: {{ $otel.headersSecretRef.key }}
{{- end }}
{{- end -}}

{{/* Probes: dict "root" $ "values" .Values.orchestrator */}}
{{- define "fleet.probes" -}}
{{- $probes := mergeOverwrite (deepCopy .root.Values.probes) (deepCopy (.values.probes | default dict)) -}}
startupProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: {{ $probes.startup.periodSeconds }}
  timeoutSeconds: {{ $probes.startup.timeoutSeconds }}
  failureThreshold: {{ $probes.startup.failureThreshold }}
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: {{ $probes.liveness.periodSeconds }}
  timeoutSeconds: {{ $probes.liveness.timeoutSeconds }}
  failureThreshold: {{ $probes.liveness.failureThreshold }}
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  periodSeconds: {{ $probes.readiness.periodSeconds }}
  timeoutSeconds: {{ $probes.readiness.timeoutSeconds }}
  failureThreshold: {{ $probes.readiness.failureThreshold }}
{{- end -}}

{{/* topologySpreadConstraints: dict "root" $ "component" "x" "values" .Values.x */}}
{{- define "fleet.topologySpread" -}}
{{- $spread := .root.Values.topologySpread -}}
{{- if .values.topologySpreadConstraints -}}
{{ toYaml .values.topologySpreadConstraints }}
{{- else -}}
{{- $keys := list -}}
{{- if $spread.zone }}{{- $keys = append $keys "topology.kubernetes.io/zone" -}}{{- end -}}
{{- if $spread.hostname }}{{- $keys = append $keys "kubernetes.io/hostname" -}}{{- end -}}
{{- range $keys }}
- maxSkew: {{ $spread.maxSkew }}
  topologyKey: {{ . }}
  whenUnsatisfiable: {{ $spread.whenUnsatisfiable }}
  labelSelector:
    matchLabels:
      {{- include "fleet.componentSelectorLabels" $ | nindent 6 }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A fleet Deployment. dict:
  root, component, values (the component's values), port, env (YAML list string),
  volumes / volumeMounts (YAML list strings, added to /tmp and /app/.fleet),
  annotations (dict of pod annotations), image (string; default from values.image)
*/}}
{{- define "fleet.deployment" -}}
{{- $root := .root -}}
{{- $v := .values -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "fleet.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "fleet.componentLabels" . | nindent 4 }}
spec:
  {{- if not ($v.autoscaling | default dict).enabled }}
  replicas: {{ $v.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  selector:
    matchLabels:
      {{- include "fleet.componentSelectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "fleet.componentLabels" . | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- $annotations := merge (dict) (.annotations | default dict) ($v.podAnnotations | default dict) }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "fleet.serviceAccountName" $root }}
      automountServiceAccountToken: false
      enableServiceLinks: false
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds | default 30 }}
      containers:
        - name: {{ .component }}
          {{- if .image }}
          image: {{ .image | quote }}
          {{- else }}
          image: {{ include "fleet.image" (dict "root" $root "image" $v.image) | quote }}
          {{- end }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          {{- with .args }}
          args:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            - name: http
              containerPort: {{ .port }}
              protocol: TCP
          env:
            {{- include "fleet.commonEnv" (dict "root" $root "component" .component "port" .port "logLevel" $v.logLevel) | nindent 12 }}
            {{- with .env }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $v.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- include "fleet.probes" (dict "root" $root "values" $v) | nindent 10 }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.containerSecurityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            - name: fleet-data
              mountPath: /app/.fleet
            {{- with .volumeMounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        - name: fleet-data
          emptyDir:
            sizeLimit: 256Mi
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
      topologySpreadConstraints:
        {{- include "fleet.topologySpread" . | nindent 8 }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/* A ClusterIP Service: dict root, component, values, port */}}
{{- define "fleet.service" -}}
{{- $v := .values -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "fleet.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "fleet.componentLabels" . | nindent 4 }}
    interceptor-fleet.io/metrics: "true"
  {{- with ($v.service | default dict).annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ ($v.service | default dict).type | default "ClusterIP" }}
  selector:
    {{- include "fleet.componentSelectorLabels" . | nindent 4 }}
  ports:
    - name: http
      port: {{ ($v.service | default dict).port | default .port }}
      targetPort: http
      protocol: TCP
{{- end -}}

{{/* HorizontalPodAutoscaler and PodDisruptionBudget when enabled: dict root, component, values */}}
{{- define "fleet.scaling" -}}
{{- $v := .values -}}
{{- $as := $v.autoscaling | default dict -}}
{{- if $as.enabled }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "fleet.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "fleet.componentLabels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "fleet.componentName" . }}
  minReplicas: {{ $as.minReplicas }}
  maxReplicas: {{ $as.maxReplicas }}
  metrics:
    {{- if $as.targetCPUUtilizationPercentage }}
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $as.targetCPUUtilizationPercentage }}
    {{- end }}
    {{- if $as.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ $as.targetMemoryUtilizationPercentage }}
    {{- end }}
{{- end }}
{{- $pdb := $v.pdb | default dict -}}
{{- if $pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "fleet.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "fleet.componentLabels" . | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" $pdb.maxUnavailable) }}
  maxUnavailable: {{ $pdb.maxUnavailable }}
  {{- else }}
  minAvailable: {{ $pdb.minAvailable | default 1 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "fleet.componentSelectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/*
NetworkPolicy of a fleet pod: dict root, component, port, from (list of extra peers),
fromOrchestrator (bool)
*/}}
{{- define "fleet.networkPolicy" -}}
{{- $root := .root -}}
{{- $peers := list -}}
{{- if .fromOrchestrator -}}
{{- $peers = append $peers (dict "podSelector" (dict "matchLabels" (fromYaml (include "fleet.componentSelectorLabels" (dict "root" $root "component" "orchestrator"))))) -}}
{{- end -}}
{{- $peers = concat $peers (.from | default list) $root.Values.networkPolicy.metricsFrom -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "fleet.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "fleet.componentLabels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "fleet.componentSelectorLabels" . | nindent 6 }}
  policyTypes:
    - Ingress
  {{- if $peers }}
  ingress:
    - from:
        {{- toYaml $peers | nindent 8 }}
      ports:
        - port: http
          protocol: TCP
  {{- else }}
  ingress: []
  {{- end }}
{{- end -}}
