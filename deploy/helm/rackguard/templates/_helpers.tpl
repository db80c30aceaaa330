{{/* The release's full name, shortened to a DNS label. */}}
{{- define "rackguard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rackguard.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rackguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- include "rackguard.fullname" . -}}
{{- else -}}
{{- required "serviceAccount.name: the workload's ServiceAccount" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The pods rackguard runs in: the created workload's, or workload.selector. */}}
{{- define "rackguard.podSelector" -}}
{{- if .Values.workload.create -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.workload.name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- else -}}
{{- if empty .Values.workload.selector -}}
{{- fail "workload.selector: the labels of the workload's pods (for the PodMonitor)" -}}
{{- end -}}
{{- .Values.workload.selector | toYaml -}}
{{- end -}}
{{- end -}}

{{- define "rackguard.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* A TOML value: strings, numbers, booleans and lists as JSON (valid TOML there), maps
     as an inline table. */}}
{{- define "rackguard.tomlValue" -}}
{{- if kindIs "map" . -}}
{ {{- $first := true -}}{{- range $k, $v := . -}}{{- if not $first }},{{ end }} {{ $k | toJson }} = {{ $v | toJson }}{{- $first = false -}}{{- end }} }
{{- else -}}
{{- . | toJson -}}
{{- end -}}
{{- end -}}

{{- define "rackguard.checkGrace" -}}
{{- $grace := .Values.terminationGracePeriodSeconds | default 30 -}}
{{- if le (int $grace) (int .Values.drainTimeoutSeconds) -}}
{{- fail "terminationGracePeriodSeconds must exceed drainTimeoutSeconds (the application stops first, then the sidecar drains)" -}}
{{- end -}}
{{- end -}}

{{/* rackguard.toml: every setting the chart sets (docs/settings.md). */}}
{{- define "rackguard.toml" -}}
{{- $v := .Values -}}
{{- include "rackguard.checkGrace" . -}}
## rackguard's settings, from the Helm chart's values (reloaded when this file changes:
## the rule's settings apply at once; others need a restart, as the log says)
upstream = {{ splitList "," (nospace (required "upstream: the Kafka cluster's bootstrap address(es)" $v.upstream)) | toJson }}
listen_host = "127.0.0.1"
advertised_host = "127.0.0.1"
bootstrap_port = {{ $v.ports.bootstrap | int }}
broker_port_base = {{ $v.ports.brokerPortBase | int }}
metrics_port = {{ $v.ports.metrics | int }}
metrics_host = "0.0.0.0"
min_insync_racks = {{ $v.minInsyncRacks | int }}
{{- with $v.topicMinInsyncRacks }}
topic_min_insync_racks = {{ include "rackguard.tomlValue" . }}
{{- end }}
{{- with $v.topicPrefixMinInsyncRacks }}
topic_prefix_min_insync_racks = {{ include "rackguard.tomlValue" . }}
{{- end }}
observe = {{ eq (required "ruleMode" $v.ruleMode) "observe" }}
error_mode = {{ $v.errorMode | toJson }}
drain_timeout_ms = {{ mul ($v.drainTimeoutSeconds | int) 1000 }}
config_watch_interval_ms = {{ mul ($v.configWatchSeconds | int) 1000 }}
log_format = "json"
{{- if eq $v.zone.source "api" }}
client_rack_command = {{ printf "rackguard node-zone --label %s" $v.zone.label | toJson }}
client_rack_mode = {{ $v.zone.mode | toJson }}
{{- else if eq $v.zone.source "downward" }}
client_rack_file = "/etc/rackguard/zone/zone"
client_rack_mode = {{ $v.zone.mode | toJson }}
{{- end }}
{{- if $v.listenerTls.enabled }}
tls_cert = {{ printf "/etc/rackguard/listener-tls/%s" $v.listenerTls.certKey | toJson }}
tls_key = {{ printf "/etc/rackguard/listener-tls/%s" $v.listenerTls.keyKey | toJson }}
{{- with $v.listenerTls.clientCaKey }}
tls_client_ca = {{ printf "/etc/rackguard/listener-tls/%s" . | toJson }}
{{- end }}
{{- end }}
security_protocol = {{ $v.securityProtocol | toJson }}
{{- if $v.upstreamTls.secretName }}
ssl_cafile = {{ printf "/etc/rackguard/upstream-tls/%s" $v.upstreamTls.caKey | toJson }}
{{- with $v.upstreamTls.certKey }}
ssl_certfile = {{ printf "/etc/rackguard/upstream-tls/%s" . | toJson }}
ssl_keyfile = {{ printf "/etc/rackguard/upstream-tls/%s" $v.upstreamTls.keyKey | toJson }}
{{- end }}
{{- end }}
{{- if hasPrefix "SASL_" $v.securityProtocol }}
sasl_mechanism = {{ $v.sasl.mechanism | toJson }}
{{- with $v.sasl.username }}
sasl_username = {{ . | toJson }}
{{- end }}
{{- if $v.sasl.passwordSecret.name }}
sasl_password_file = {{ printf "/etc/rackguard/sasl-password/%s" $v.sasl.passwordSecret.key | toJson }}
{{- end }}
{{- if $v.sasl.tokenSecret.name }}
sasl_oauthbearer_token_file = {{ printf "/etc/rackguard/sasl-token/%s" $v.sasl.tokenSecret.key | toJson }}
{{- end }}
{{- end }}
{{- range $k, $val := $v.extraSettings }}
{{ $k }} = {{ include "rackguard.tomlValue" $val }}
{{- end }}
{{- end -}}

{{/* The native sidecar: an init container that keeps running (restartPolicy: Always),
     started before the application's containers and stopped after them. */}}
{{- define "rackguard.sidecar" -}}
{{- $v := .Values -}}
- name: rackguard
  image: {{ include "rackguard.image" . }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  restartPolicy: Always
  args: ["serve", "--config", "/etc/rackguard/config/rackguard.toml"]
  env:
    # the image's defaults, replaced: Kafka ports on the pod's loopback only
    - name: RACKGUARD_LISTEN_HOST
      value: "127.0.0.1"
    - name: RACKGUARD_METRICS_PORT
      value: {{ $v.ports.metrics | quote }}
    - name: RACKGUARD_LOG_FORMAT
      value: json
    {{- if eq $v.zone.source "api" }}
    - name: NODE_NAME
      valueFrom:
        fieldRef:
          fieldPath: spec.nodeName
    {{- end }}
  ports:
    - name: rg-metrics
      containerPort: {{ $v.ports.metrics | int }}
      protocol: TCP
  startupProbe:
    httpGet:
      path: /readyz
      port: rg-metrics
    periodSeconds: {{ $v.probes.startup.periodSeconds }}
    timeoutSeconds: {{ $v.probes.startup.timeoutSeconds }}
    failureThreshold: {{ $v.probes.startup.failureThreshold }}
  readinessProbe:
    httpGet:
      path: /readyz
      port: rg-metrics
    periodSeconds: {{ $v.probes.readiness.periodSeconds }}
    timeoutSeconds: {{ $v.probes.readiness.timeoutSeconds }}
    failureThreshold: {{ $v.probes.readiness.failureThreshold }}
    successThreshold: {{ $v.probes.readiness.successThreshold }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: rg-metrics
    periodSeconds: {{ $v.probes.liveness.periodSeconds }}
    timeoutSeconds: {{ $v.probes.liveness.timeoutSeconds }}
    failureThreshold: {{ $v.probes.liveness.failureThreshold }}
  resources:
    {{- toYaml $v.resources | nindent 4 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 10001
    runAsGroup: 10001
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    privileged: false
    capabilities:
      drop: ["ALL"]
    seccompProfile:
      type: RuntimeDefault
  volumeMounts:
    - name: rackguard-config
      mountPath: /etc/rackguard/config
      readOnly: true
    - name: rackguard-tmp
      mountPath: /tmp
    {{- if eq $v.zone.source "downward" }}
    - name: rackguard-zone
      mountPath: /etc/rackguard/zone
      readOnly: true
    {{- end }}
    {{- if $v.listenerTls.enabled }}
    - name: rackguard-listener-tls
      mountPath: /etc/rackguard/listener-tls
      readOnly: true
    {{- end }}
    {{- if $v.upstreamTls.secretName }}
    - name: rackguard-upstream-tls
      mountPath: /etc/rackguard/upstream-tls
      readOnly: true
    {{- end }}
    {{- if and (hasPrefix "SASL_" $v.securityProtocol) $v.sasl.passwordSecret.name }}
    - name: rackguard-sasl-password
      mountPath: /etc/rackguard/sasl-password
      readOnly: true
    {{- end }}
    {{- if and (hasPrefix "SASL_" $v.securityProtocol) $v.sasl.tokenSecret.name }}
    - name: rackguard-sasl-token
      mountPath: /etc/rackguard/sasl-token
      readOnly: true
    {{- end }}
{{- end -}}

{{- define "rackguard.volumes" -}}
{{- $v := .Values -}}
- name: rackguard-config
  configMap:
    name: {{ include "rackguard.fullname" . }}
- name: rackguard-tmp
  emptyDir:
    sizeLimit: 16Mi
{{- if eq $v.zone.source "downward" }}
- name: rackguard-zone
  downwardAPI:
    items:
      - path: zone
        fieldRef:
          fieldPath: {{ printf "metadata.labels['%s']" $v.zone.label }}
{{- end }}
{{- if $v.listenerTls.enabled }}
- name: rackguard-listener-tls
  secret:
    secretName: {{ required "listenerTls.secretName" $v.listenerTls.secretName }}
    defaultMode: 0444  # read by the sidecar's user; mounted in no other container
{{- end }}
{{- if $v.upstreamTls.secretName }}
- name: rackguard-upstream-tls
  secret:
    secretName: {{ $v.upstreamTls.secretName }}
    defaultMode: 0444  # read by the sidecar's user; mounted in no other container
{{- end }}
{{- if and (hasPrefix "SASL_" $v.securityProtocol) $v.sasl.passwordSecret.name }}
- name: rackguard-sasl-password
  secret:
    secretName: {{ $v.sasl.passwordSecret.name }}
    defaultMode: 0444  # read by the sidecar's user; mounted in no other container
{{- end }}
{{- if and (hasPrefix "SASL_" $v.securityProtocol) $v.sasl.tokenSecret.name }}
- name: rackguard-sasl-token
  secret:
    secretName: {{ $v.sasl.tokenSecret.name }}
    defaultMode: 0444  # read by the sidecar's user; mounted in no other container
{{- end }}
{{- end -}}

{{/* What the pod needs besides its containers: the release's ServiceAccount (when it
     makes one, for the zone) and, when set, a grace period covering the drain. */}}
{{- define "rackguard.podSpecExtras" -}}
{{- if and .Values.serviceAccount.create (eq .Values.zone.source "api") }}
serviceAccountName: {{ include "rackguard.serviceAccountName" . }}
{{- end }}
{{- with .Values.terminationGracePeriodSeconds }}
terminationGracePeriodSeconds: {{ . | int }}
{{- end }}
{{- include "rackguard.checkGrace" . }}
{{- end -}}
