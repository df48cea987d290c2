{{/*
The embedded nats-server (nats.urls empty). It holds the events, the checkpoints and the
object index, so it stays on the pod's loopback unless nats.embedded.expose publishes it, and
then only with credentials from nats.auth, which the embedded server requires (the relay does
the same check at start and exits 2).
*/}}

{{/* The listen port of the embedded server. */}}
{{- define "kube-nats-relay.embeddedPort" -}}
{{- regexReplaceAll "^.*:" .Values.nats.embedded.listen "" | int }}
{{- end }}

{{/* RELAY_NATS_LISTEN: every interface at listen's port when exposed, else listen as given. */}}
{{- define "kube-nats-relay.embeddedListen" -}}
{{- if .Values.nats.embedded.expose }}
{{- printf "0.0.0.0:%s" (include "kube-nats-relay.embeddedPort" .) }}
{{- else }}
{{- .Values.nats.embedded.listen }}
{{- end }}
{{- end }}

{{/* "true" when nats.auth holds credentials the embedded server can require. */}}
{{- define "kube-nats-relay.embeddedCredentials" -}}
{{- with .Values.nats.auth }}
{{- if and .existingSecret (or (and .userKey .passwordKey) .tokenKey .nkeyKey) }}true{{ else }}false{{ end }}
{{- end }}
{{- end }}

{{/* Fails the render on embedded-server values the relay would refuse at start. */}}
{{- define "kube-nats-relay.embeddedCheck" -}}
{{- if not .Values.nats.urls }}
{{- $v := .Values.nats }}
{{- $creds := eq (include "kube-nats-relay.embeddedCredentials" .) "true" }}
{{- $how := "set nats.auth.existingSecret with userKey and passwordKey, tokenKey or nkeyKey (the embedded server then requires them)" }}
{{- if and $v.embedded.expose (not $creds) }}
{{- fail (printf "nats.embedded.expose=true publishes the embedded nats-server, which holds every event and checkpoint, to other pods: it needs credentials: %s" $how) }}
{{- end }}
{{- $host := regexReplaceAll ":[0-9]*$" $v.embedded.listen "" | trimPrefix "[" | trimSuffix "]" }}
{{- /* As the relay decides: localhost, or a loopback IP address (127.0.0.0/8, ::1). */}}
{{- $loopback := or (eq $host "localhost") (eq $host "::1") (regexMatch "^127\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}$" $host) }}
{{- if and (not $v.embedded.expose) (not $loopback) (not $creds) }}
{{- fail (printf "nats.embedded.listen=%s accepts clients beyond the pod's loopback without authentication: %s, or listen on 127.0.0.1 (nats.embedded.expose=true publishes it through the Service)" $v.embedded.listen $how) }}
{{- end }}
{{- if and $v.auth.existingSecret $v.auth.credsKey }}
{{- fail "nats.auth.credsKey: the embedded nats-server (nats.urls empty) cannot verify a JWT credentials file without its operator: use userKey and passwordKey, tokenKey or nkeyKey, or set nats.urls" }}
{{- end }}
{{- if $v.tls.existingSecret }}
{{- fail "nats.tls is client TLS to an external NATS: the embedded nats-server (nats.urls empty) serves no TLS; unset nats.tls.existingSecret, or set nats.urls" }}
{{- end }}
{{- end }}
{{- end }}
