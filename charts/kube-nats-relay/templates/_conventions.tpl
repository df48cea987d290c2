{{/*
kube-nats-relay.image: the relay image, repository@digest when image.digest is set (the
digest wins over the tag; values.schema.json checks its form), else repository:tag (the tag
defaults to the appVersion).
*/}}
{{- define "kube-nats-relay.image" -}}
{{- $i := .Values.image }}
{{- if $i.digest }}
{{- printf "%s@%s" $i.repository $i.digest }}
{{- else }}
{{- printf "%s:%s" $i.repository (toString ($i.tag | default .Chart.AppVersion)) }}
{{- end }}
{{- end }}

{{/*
kube-nats-relay.automountToken: "true" when the relay's pod needs the ServiceAccount token,
that is unless it watches through a kubeconfig (kubeconfig.existingSecret), which brings its
own credentials. The ServiceAccount itself never mounts its token (serviceAccount.automount).
*/}}
{{- define "kube-nats-relay.automountToken" -}}
{{- if .Values.kubeconfig.existingSecret }}false{{ else }}true{{ end }}
{{- end }}

{{/*
kube-nats-relay.scheduling: the pod's affinity and topologySpreadConstraints. What the user
set wins. Otherwise, above one replica and with spreadReplicas on, the replicas are spread
over nodes and zones, softly (ScheduleAnyway): a one-node cluster still runs them all.
*/}}
{{- define "kube-nats-relay.scheduling" -}}
{{- $v := .Values }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml $v.topologySpreadConstraints | nindent 2 }}
{{- else if and $v.spreadReplicas (gt (int $v.replicaCount) 1) (not (dig "podAntiAffinity" nil ($v.affinity | default dict))) }}
topologySpreadConstraints:
  {{- range list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
  - maxSkew: 1
    topologyKey: {{ . }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "kube-nats-relay.selectorLabels" $ | nindent 8 }}
    # Spread each rollout's pods on their own, not against the old ReplicaSet's.
    matchLabelKeys:
      - pod-template-hash
  {{- end }}
{{- end }}
{{- end }}

{{/*
kube-nats-relay.natsPorts: the TCP ports of nats.urls, comma-separated, each once, unless
networkPolicy.nats.ports lists them: a URL's explicit port, else 4222 (nats, tls), 80 (ws)
or 443 (wss), as nats.go does.
*/}}
{{- define "kube-nats-relay.natsPorts" -}}
{{- $ports := list }}
{{- if .Values.networkPolicy.nats.ports }}
{{- range .Values.networkPolicy.nats.ports }}{{ $ports = append $ports (int .) }}{{ end }}
{{- else }}
{{- $defaults := dict "nats" 4222 "tls" 4222 "ws" 80 "wss" 443 }}
{{- range .Values.nats.urls }}
{{- $u := trim . }}
{{- if not (contains "://" $u) }}{{ $u = printf "nats://%s" $u }}{{ end }}
{{- $scheme := regexReplaceAll "://.*$" $u "" | lower }}
{{- $hostport := regexReplaceAll "^[^:]*://([^@/]*@)?([^/]*).*$" $u "${2}" }}
{{- if regexMatch ":[0-9]+$" $hostport }}
{{- $ports = append $ports (regexReplaceAll "^.*:" $hostport "" | int) }}
{{- else }}
{{- $ports = append $ports (get $defaults $scheme | default 4222) }}
{{- end }}
{{- end }}
{{- end }}
{{- join "," ($ports | uniq) }}
{{- end }}

{{/*
kube-nats-relay.testEvents: "true" when helm test can reach NATS to check that an event
arrived: NATS given by nats.urls, or the embedded server exposed through the Service.
*/}}
{{- define "kube-nats-relay.testEvents" -}}
{{- if and .Values.tests.events (or .Values.nats.urls (dig "expose" false .Values.nats.embedded)) }}true{{ else }}false{{ end }}
{{- end }}

{{/*
Labels of the helm test pod; the NetworkPolicy lets it reach the relay. Not the selector
labels: the Deployment's ReplicaSet would adopt the pod, and the Service send it traffic.
*/}}
{{- define "kube-nats-relay.testLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
