{{/*
kube-nats-relay.strategy: the Deployment's strategy. Without leader election two relays must
never run at once: Recreate. With it, RollingUpdate: a new pod stands by until the old leader
releases the Lease. One change needs Recreate although leader election is on: turning it on
for a Deployment whose pods run without it (an unelected relay relays whatever the Lease
says), so the existing Deployment is looked up; under `helm template` (no cluster) the lookup
finds nothing and the strategy is RollingUpdate.
*/}}
{{- define "kube-nats-relay.strategy" -}}
{{- if ne (include "kube-nats-relay.leaderElect" .) "true" }}
# Without leader election two relays must never run at once.
type: Recreate
{{- else if eq (include "kube-nats-relay.runningUnelected" .) "true" }}
# The running pods relay without leader election: they stop before elected ones start.
type: Recreate
{{- else }}
# A new pod stands by until the old leader releases the Lease.
type: RollingUpdate
rollingUpdate:
  maxSurge: 1
  maxUnavailable: 0
{{- end }}
{{- end }}

{{/*
kube-nats-relay.runningUnelected: "true" when the release's Deployment exists and its relay
container runs without leader election (RELAY_LEADER_ELECT missing or not "true").
*/}}
{{- define "kube-nats-relay.runningUnelected" -}}
{{- $d := lookup "apps/v1" "Deployment" .Release.Namespace (include "kube-nats-relay.fullname" .) }}
{{- $unelected := false }}
{{- range (dig "spec" "template" "spec" "containers" list ($d | default dict)) }}
{{- if eq .name "relay" }}
{{- $unelected = true }}
{{- range (.env | default list) }}
{{- if and (eq .name "RELAY_LEADER_ELECT") (eq (toString .value) "true") }}{{ $unelected = false }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- $unelected }}
{{- end }}
