{{/*
Naming helpers.

Every name is truncated to 63 characters: Kubernetes names that become DNS labels (Services,
label values, and the pod hostnames derived from them) may not be longer than 63 characters
(RFC 1123), and the API server rejects the object rather than shortening it for us. A trailing
"-" left by the cut is trimmed because a DNS label may not end with one.
*/}}

{{- define "hyperframe-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release-qualified name of every namespaced object. If the release name already contains
the chart name it is used alone, so `helm install hyperframe-operator ...` does not produce
"hyperframe-operator-hyperframe-operator".
*/}}
{{- define "hyperframe-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Cluster-scoped objects (ClusterRole, ClusterRoleBinding) share one namespace-less name space,
so two releases of the same name in different namespaces must not collide: the namespace is
part of the name. Truncated to 63 characters like every other name, for the same reason.
*/}}
{{- define "hyperframe-operator.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "hyperframe-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Names with a fixed suffix keep the suffix whole: the full name is cut so the result fits 63.
*/}}
{{- define "hyperframe-operator.leaderElectionName" -}}
{{- printf "%s-leader-election" (include "hyperframe-operator.fullname" . | trunc 47 | trimSuffix "-") }}
{{- end }}

{{- define "hyperframe-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hyperframe-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hyperframe-operator.fullname" .) .Values.serviceAccount.name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- required "serviceAccount.name: is empty, but serviceAccount.create is false; name the existing ServiceAccount the operator should use" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Labels that never change for the life of a release: used in selectors. */}}
{{- define "hyperframe-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hyperframe-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "hyperframe-operator.labels" -}}
helm.sh/chart: {{ include "hyperframe-operator.chart" . }}
app.kubernetes.io/name: {{ include "hyperframe-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hyperframe
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The operator image. Repository, tag and digest default to what Chart.yaml records, and Chart.yaml
is generated from the pin matrix (images/matrix.yaml, images/published.yaml), so the chart never
names a version twice. A digest pins the image exactly and wins over the tag; the recorded
digest applies only while image.repository and image.tag are left at their defaults.
*/}}
{{- define "hyperframe-operator.image" -}}
{{- $repository := .Values.image.repository | default (index .Chart.Annotations "hyperframe.dev/operator-image") -}}
{{- $digest := .Values.image.digest -}}
{{- if and (not $digest) (not .Values.image.repository) (not .Values.image.tag) -}}
{{- $digest = index .Chart.Annotations "hyperframe.dev/operator-image-digest" | default "" -}}
{{- end -}}
{{- if $digest -}}
{{- printf "%s@%s" $repository $digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end }}
