{{/*
The operator's configuration, as the HYPERFRAME_* environment variables that
hyperframe.controller.config.OperatorConfig reads at start-up (it rejects unknown HYPERFRAME_*
names and names the variable in any error). This file is the one place that maps chart values
to them; a unit test parses the rendered variables with OperatorConfig itself.
*/}}
{{- define "hyperframe-operator.leaseName" -}}
{{- .Values.operator.leaderElection.leaseName | default (include "hyperframe-operator.fullname" .) }}
{{- end }}

{{- define "hyperframe-operator.statusEndpointURL" -}}
{{- printf "%s://%s.%s.svc:%v" (ternary "https" "http" .Values.statusTLS.enabled) (include "hyperframe-operator.fullname" .) .Release.Namespace .Values.ports.status }}
{{- end }}

{{- define "hyperframe-operator.statusTLSSecret" -}}
{{- .Values.statusTLS.existingSecret | default (printf "%s-status-tls" (include "hyperframe-operator.fullname" . | trunc 52 | trimSuffix "-")) }}
{{- end }}

{{- define "hyperframe-operator.statusTLSDir" -}}/etc/hyperframe-operator/status-tls{{- end }}

{{- define "hyperframe-operator.env" -}}
- name: HYPERFRAME_NAMESPACES
  value: {{ join "," .Values.watchNamespaces | quote }}
- name: HYPERFRAME_LOG_LEVEL
  value: {{ .Values.operator.logLevel | quote }}
- name: HYPERFRAME_LOG_FORMAT
  value: {{ .Values.operator.logFormat | quote }}
- name: HYPERFRAME_API_QPS
  value: {{ .Values.operator.qps | quote }}
- name: HYPERFRAME_API_BURST
  value: {{ .Values.operator.burst | quote }}
- name: HYPERFRAME_WORKERS
  value: {{ .Values.operator.workers | quote }}
# The replicas elect their one active replica with this Lease in the release's namespace.
- name: HYPERFRAME_LEASE_NAME
  value: {{ if .Values.operator.leaderElection.enabled }}{{ include "hyperframe-operator.leaseName" . | quote }}{{ else }}""{{ end }}
- name: HYPERFRAME_LEASE_NAMESPACE
  value: {{ .Release.Namespace | quote }}
- name: HYPERFRAME_LIVENESS_PORT
  value: {{ .Values.ports.health | quote }}
- name: HYPERFRAME_METRICS_PORT
  value: {{ .Values.ports.metrics | quote }}
- name: HYPERFRAME_STATUS_PORT
  value: {{ .Values.ports.status | quote }}
# The URL training pods post progress to: this release's Service, reachable from any namespace.
# Without the Service the pods get no URL and progress reporting is off.
- name: HYPERFRAME_STATUS_ENDPOINT_URL
  value: {{ if .Values.service.enabled }}{{ include "hyperframe-operator.statusEndpointURL" . | quote }}{{ else }}""{{ end }}
{{- if .Values.statusTLS.enabled }}
{{- $dir := include "hyperframe-operator.statusTLSDir" . }}
# The serving certificate of the progress endpoint, mounted from the status TLS Secret.
- name: HYPERFRAME_STATUS_TLS_CERT_FILE
  value: {{ printf "%s/tls.crt" $dir | quote }}
- name: HYPERFRAME_STATUS_TLS_KEY_FILE
  value: {{ printf "%s/tls.key" $dir | quote }}
- name: HYPERFRAME_STATUS_TLS_CA_FILE
  value: {{ printf "%s/ca.crt" $dir | quote }}
{{- end }}
{{- end }}
