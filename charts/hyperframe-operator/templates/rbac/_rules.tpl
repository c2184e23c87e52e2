{{/*
RBAC rules from files/operator-rbac.yaml, which hack/generate.py generates from the operator's
own list of API calls (hyperframe.controller.rbac). Each rule carries its scope (Cluster or
Namespaced, or OperatorNamespace for the Lease in the release's namespace) and a `when` tag saying which configuration needs it, so a default install grants
nothing the operator does not use.

"hyperframe-operator.rules" takes (dict "root" $ "scope" "Cluster"|"Namespaced"|"OperatorNamespace") and prints the
wanted rules of that scope as a YAML list (possibly empty).
*/}}
{{- define "hyperframe-operator.ruleWanted" -}}
{{- $v := .root.Values -}}
{{- if eq .rule.when "always" -}}true
{{- else if eq .rule.when "podGroups" -}}{{ if $v.rbac.podGroups.enabled }}true{{ end }}
{{- else if eq .rule.when "leaderElection" -}}{{ if $v.operator.leaderElection.enabled }}true{{ end }}
{{- else -}}
{{- fail (printf "files/operator-rbac.yaml: unknown when %q; regenerate the chart with hack/generate.py" .rule.when) -}}
{{- end -}}
{{- end }}

{{- define "hyperframe-operator.rules" -}}
{{- $root := .root -}}
{{- $scope := .scope -}}
{{- range (($root.Files.Get "files/operator-rbac.yaml") | fromYaml).rules }}
{{- if and (eq .scope $scope) (include "hyperframe-operator.ruleWanted" (dict "root" $root "rule" .)) }}
# {{ .why }}
- apiGroups: {{ toJson .apiGroups }}
  resources: {{ toJson .resources }}
  verbs: {{ toJson .verbs }}
{{- end }}
{{- end }}
{{- end }}
