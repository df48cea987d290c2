{{/*
kube-nats-relay.requireAPI fails the render when the cluster does not serve an API that a value
asks for, before anything is applied, instead of an install that aborts half-way on "no matches
for kind". Arguments: (list $ "monitoring.coreos.com/v1/ServiceMonitor" "serviceMonitor.enabled").
*/}}
{{- define "kube-nats-relay.requireAPI" -}}
{{- $ctx := index . 0 }}
{{- $api := index . 1 }}
{{- $value := index . 2 }}
{{- if not ($ctx.Capabilities.APIVersions.Has $api) }}
{{- fail (printf "%s=true needs the %s API, which the cluster does not serve: install the Prometheus Operator's CRDs first, or set %s=false. helm template and helm lint do not ask the cluster: pass --api-versions %s to helm template" $value $api $value $api) }}
{{- end }}
{{- end }}

{{/*
kube-nats-relay.alertSelector is the label matchers every alert expression starts with: the
release's own scrape job (the ServiceMonitor's job is the Service's name) in its namespace, or
prometheusRule.selector.
*/}}
{{- define "kube-nats-relay.alertSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "job=%q,namespace=%q" (include "kube-nats-relay.fullname" .) .Release.Namespace) }}
{{- end }}
