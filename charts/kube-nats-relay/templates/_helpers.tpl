{{/* Names. */}}
{{- define "kube-nats-relay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kube-nats-relay.fullname" -}}
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

{{/* Name of cluster-wide objects (ClusterRole, ClusterRoleBinding): one per release and namespace. */}}
{{- define "kube-nats-relay.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "kube-nats-relay.fullname" .) }}
{{- end }}

{{- define "kube-nats-relay.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kube-nats-relay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kube-nats-relay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-nats-relay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kube-nats-relay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kube-nats-relay.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
"true" when leader election is on: unless leaderElection.enabled is false, whatever the
replica count (so that scaling never turns it on beside a running relay), and never with the
embedded nats-server (each replica's own; the relay refuses leader election with it).
*/}}
{{- define "kube-nats-relay.leaderElect" -}}
{{- if and (ne (toString .Values.leaderElection.enabled) "false") .Values.nats.urls }}true{{ else }}false{{ end }}
{{- end }}

{{- define "kube-nats-relay.leaseName" -}}
{{- default (include "kube-nats-relay.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{- define "kube-nats-relay.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/* Where the rules file is mounted. */}}
{{- define "kube-nats-relay.rulesDir" -}}/etc/kube-nats-relay/rules{{- end }}
{{- define "kube-nats-relay.natsAuthDir" -}}/etc/kube-nats-relay/nats-auth{{- end }}
{{- define "kube-nats-relay.natsTLSDir" -}}/etc/kube-nats-relay/nats-tls{{- end }}
{{- define "kube-nats-relay.kubeconfigDir" -}}/etc/kube-nats-relay/kubeconfig{{- end }}
{{- define "kube-nats-relay.dataDir" -}}/data{{- end }}

{{/*
Cluster-scoped resources of Kubernetes itself, as resource.group ("resource" for the core
group). RBAC grants on them only through a ClusterRole. rbac.clusterScopedResources adds more
(cluster-scoped CRDs). The chart's test compares this list with the apiserver's discovery.
*/}}
{{- define "kube-nats-relay.builtinClusterScoped" -}}
componentstatuses
namespaces
nodes
persistentvolumes
mutatingwebhookconfigurations.admissionregistration.k8s.io
validatingwebhookconfigurations.admissionregistration.k8s.io
mutatingadmissionpolicies.admissionregistration.k8s.io
mutatingadmissionpolicybindings.admissionregistration.k8s.io
validatingadmissionpolicies.admissionregistration.k8s.io
validatingadmissionpolicybindings.admissionregistration.k8s.io
customresourcedefinitions.apiextensions.k8s.io
apiservices.apiregistration.k8s.io
selfsubjectreviews.authentication.k8s.io
tokenreviews.authentication.k8s.io
selfsubjectaccessreviews.authorization.k8s.io
selfsubjectrulesreviews.authorization.k8s.io
subjectaccessreviews.authorization.k8s.io
certificatesigningrequests.certificates.k8s.io
clustertrustbundles.certificates.k8s.io
storageversionmigrations.storagemigration.k8s.io
flowschemas.flowcontrol.apiserver.k8s.io
prioritylevelconfigurations.flowcontrol.apiserver.k8s.io
storageversions.internal.apiserver.k8s.io
ingressclasses.networking.k8s.io
ipaddresses.networking.k8s.io
servicecidrs.networking.k8s.io
runtimeclasses.node.k8s.io
clusterrolebindings.rbac.authorization.k8s.io
clusterroles.rbac.authorization.k8s.io
deviceclasses.resource.k8s.io
devicetaintrules.resource.k8s.io
resourceslices.resource.k8s.io
priorityclasses.scheduling.k8s.io
csidrivers.storage.k8s.io
csinodes.storage.k8s.io
storageclasses.storage.k8s.io
volumeattachments.storage.k8s.io
volumeattributesclasses.storage.k8s.io
{{- end }}

{{/*
kube-nats-relay.parseResource: a resource as kubectl writes it -> "group/resource" (group
empty for the core group). The first segment is the resource; with three or more segments a
second one that looks like a Kubernetes version (v1, v2beta1) is the version and the rest the
group; otherwise everything after the first dot is the group. The relay resolves the same way.
*/}}
{{- define "kube-nats-relay.parseResource" -}}
{{- $parts := splitList "." . }}
{{- $resource := first $parts }}
{{- $rest := rest $parts }}
{{- if and (ge (len $parts) 3) (regexMatch "^v[0-9]+((alpha|beta)[0-9]+)?$" (first $rest)) }}
{{- $rest = rest $rest }}
{{- end }}
{{- printf "%s/%s" (join "." $rest) $resource }}
{{- end }}

{{/*
kube-nats-relay.rbacPlan: what the relay must list and watch, as YAML:
  cluster: ["group/resource", ...]          granted by the ClusterRole
  namespaced: {namespace: ["group/resource"]} granted by a Role in each namespace
It follows the relay's own precedence (docs/configuration.md): relay.namespaces and
relay.namespaceSelector, overridden by the rules file's `defaults`, overridden by each entry
of `rules.resources`. A resource is granted in the namespaces that apply to it, or
cluster-wide when it is cluster-scoped or no namespaces apply; a namespace selector also needs
list and watch on namespaces.
*/}}
{{- define "kube-nats-relay.rbacPlan" -}}
{{- $v := .Values }}
{{- $csKeys := list }}
{{- range splitList "\n" (include "kube-nats-relay.builtinClusterScoped" .) }}{{ $csKeys = append $csKeys (include "kube-nats-relay.parseResource" (trim .)) }}{{ end }}
{{- range ($v.rbac.clusterScopedResources | default list) }}{{ $csKeys = append $csKeys (include "kube-nats-relay.resourceKey" (dict "spec" . "from" "rbac.clusterScopedResources")) }}{{ end }}
{{- $defNs := $v.relay.namespaces | default list }}
{{- $defSel := $v.relay.namespaceSelector | default "" }}
{{- $rules := list }}
{{- if kindIs "map" $v.rules }}
{{- $d := $v.rules.defaults | default dict }}
{{- if hasKey $d "namespaces" }}{{ $defNs = $d.namespaces | default list }}{{ end }}
{{- if hasKey $d "namespaceSelector" }}{{ $defSel = $d.namespaceSelector | default "" }}{{ end }}
{{- $rules = $v.rules.resources | default list }}
{{- end }}
{{- $ruled := list }}
{{- range $rules }}{{ $ruled = append $ruled .resource }}{{ end }}
{{- $entries := list }}
{{- range ($v.relay.resources | default list) }}
{{- if not (has . $ruled) }}
{{- $entries = append $entries (dict "resources" (list .) "from" "relay.resources" "namespaces" $defNs "selector" (ne $defSel "")) }}
{{- end }}
{{- end }}
{{- range $rules }}
{{- $ns := $defNs }}
{{- if hasKey . "namespaces" }}{{ $ns = .namespaces | default list }}{{ end }}
{{- $sel := $defSel }}
{{- if hasKey . "namespaceSelector" }}{{ $sel = .namespaceSelector | default "" }}{{ end }}
{{- $entries = append $entries (dict "resources" (list .resource) "from" "rules.resources" "namespaces" $ns "selector" (ne $sel "")) }}
{{- end }}
{{- $cluster := list }}
{{- $namespaced := dict }}
{{- range $entries }}
{{- $e := . }}
{{- if $e.selector }}{{ $cluster = append $cluster "/namespaces" }}{{ end }}
{{- range $e.resources }}
{{- $key := include "kube-nats-relay.resourceKey" (dict "spec" . "from" $e.from) }}
{{- if or (has $key $csKeys) (empty $e.namespaces) (eq (include "kube-nats-relay.crdScope" $key) "Cluster") }}
{{- $cluster = append $cluster $key }}
{{- else }}
{{- range $e.namespaces }}
{{- $_ := set $namespaced . (append (get $namespaced . | default list) $key | uniq | sortAlpha) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml (dict "cluster" ($cluster | uniq | sortAlpha) "namespaced" $namespaced) }}
{{- end }}

{{/*
kube-nats-relay.rbacRules: PolicyRules granting list and watch on a list of "group/resource",
one rule per API group.
*/}}
{{- define "kube-nats-relay.rbacRules" -}}
{{- $byGroup := dict }}
{{- range . }}
{{- $g := regexReplaceAll "/[^/]*$" . "" }}
{{- $r := regexReplaceAll "^.*/" . "" }}
{{- $_ := set $byGroup (printf "g:%s" $g) (append (get $byGroup (printf "g:%s" $g) | default list) $r) }}
{{- end }}
{{- range $k := keys $byGroup | sortAlpha }}
- apiGroups: [{{ trimPrefix "g:" $k | quote }}]
  resources: {{ get $byGroup $k | uniq | sortAlpha | toJson }}
  verbs: ["list", "watch"]
{{- end }}
{{- end }}

{{/* The number of resources configured (relay.resources and the rules'), for the checks. */}}
{{- define "kube-nats-relay.resourceCount" -}}
{{- $plan := include "kube-nats-relay.rbacPlan" . | fromYaml }}
{{- $all := without $plan.cluster "/namespaces" }}
{{- range $ns, $r := $plan.namespaced }}{{ $all = concat $all $r }}{{ end }}
{{- len $all }}
{{- end }}

{{/*
kube-nats-relay.env: the container's environment as a map from name to EnvVar. Structured
values first, then `env` (by name) and `extraEnv` override them; rendered sorted by name, so
that no name appears twice.
*/}}
{{/*
GOMEMLIMIT in bytes: goMemLimitPercent of resources.limits.memory; empty without a limit (the
relay then reads the container's cgroup limit itself). The quantity is read as Kubernetes
writes it: digits, an optional fraction and a suffix (Ki Mi Gi Ti Pi Ei, k M G T P E).
*/}}
{{- define "kube-nats-relay.goMemLimit" -}}
{{- $limit := dig "limits" "memory" "" (.Values.resources | default dict) }}
{{- if $limit }}
{{- $q := $limit | toString }}
{{- if not (kindIs "string" $limit) }}{{ $q = int64 $limit | toString }}{{ end }}
{{- $re := "^([0-9]+)(\\.([0-9]+))?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$" }}
{{- if not (regexMatch $re $q) }}
{{- fail (printf "resources.limits.memory %q: the chart reads digits with a suffix (256Mi, 1Gi, 1.5G) to set GOMEMLIMIT; write it so, or set env.GOMEMLIMIT" $q) }}
{{- end }}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "P" 1000000000000000 "E" 1000000000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "Pi" 1125899906842624 "Ei" 1152921504606846976 }}
{{- $whole := regexReplaceAll $re $q "${1}" }}
{{- $frac := regexReplaceAll $re $q "${3}" }}
{{- $unit := get $units (regexReplaceAll $re $q "${4}") }}
{{- $scale := 1 }}
{{- range until (len $frac) }}{{ $scale = mul $scale 10 }}{{ end }}
{{- $bytes := div (mul (atoi (print $whole $frac)) $unit) $scale }}
{{- div (mul $bytes (int .Values.goMemLimitPercent)) 100 }}
{{- end }}
{{- end }}

{{- define "kube-nats-relay.env" -}}
{{- $v := .Values }}
{{- $env := dict }}
{{- $lists := dict
  "RELAY_RESOURCES" $v.relay.resources
  "RELAY_NAMESPACES" $v.relay.namespaces
  "RELAY_EXCLUDE_NAMESPACES" $v.relay.excludeNamespaces
  "RELAY_EVENT_TYPES" $v.relay.eventTypes
  "RELAY_MIRROR_RESOURCES" $v.relay.mirrorResources
  "NATS_URL" $v.nats.urls }}
{{- range $name, $l := $lists }}
{{- if $l }}{{ $_ := set $env $name (dict "name" $name "value" (join "," $l)) }}{{ end }}
{{- end }}
{{- $scalars := dict
  "RELAY_NAMESPACE_SELECTOR" $v.relay.namespaceSelector
  "RELAY_LABEL_SELECTOR" $v.relay.labelSelector
  "RELAY_FIELD_SELECTOR" $v.relay.fieldSelector
  "RELAY_MIRROR_BUCKET" $v.relay.mirrorBucket
  "RELAY_CLUSTER" $v.relay.cluster
  "RELAY_SUBJECT_PREFIX" $v.relay.subjectPrefix
  "RELAY_DATASCHEMA_BASE_URL" $v.relay.dataSchemaBaseURL
  "RELAY_STREAM" $v.relay.stream
  "RELAY_STREAM_REPLICAS" $v.relay.streamReplicas
  "RELAY_DUPLICATE_WINDOW" $v.relay.duplicateWindow
  "RELAY_MAX_AGE" $v.relay.maxAge
  "RELAY_MAX_BYTES" $v.relay.maxBytes
  "RELAY_STREAM_COMPRESSION" $v.relay.streamCompression
  "RELAY_CHECKPOINT_BUCKET" $v.relay.checkpointBucket
  "RELAY_INDEX_BUCKET" $v.relay.indexBucket
  "RELAY_CHECKPOINT_INTERVAL" $v.relay.checkpointInterval
  "RELAY_INITIAL_SYNC" $v.relay.initialSync
  "RELAY_WATCH_LIST" $v.relay.watchList
  "RELAY_BUFFER_SIZE" $v.relay.bufferSize
  "RELAY_MAX_INFLIGHT" $v.relay.maxInflight
  "RELAY_MEMORY_BUDGET" $v.relay.memoryBudget
  "RELAY_SHUTDOWN_TIMEOUT" $v.relay.shutdownTimeout
  "RELAY_KUBE_QPS" $v.relay.kubeQPS
  "RELAY_KUBE_BURST" $v.relay.kubeBurst
  "RELAY_KUBE_COMPRESSION" $v.relay.kubeCompression
  "RELAY_LOG_LEVEL" $v.relay.logLevel
  "RELAY_LOG_FORMAT" $v.relay.logFormat
  "RELAY_JS_DOMAIN" $v.nats.jetstream.domain
  "RELAY_JS_API_PREFIX" $v.nats.jetstream.apiPrefix
  "RELAY_NATS_INBOX_PREFIX" $v.nats.inboxPrefix }}
{{- range $name, $s := $scalars }}
{{- if ne (toString ($s | default "")) "" }}{{ $_ := set $env $name (dict "name" $name "value" (toString $s)) }}{{ end }}
{{- end }}
{{- $_ := set $env "RELAY_HTTP_ADDR" (dict "name" "RELAY_HTTP_ADDR" "value" (printf ":%d" (int $v.http.port))) }}
{{- with include "kube-nats-relay.goMemLimit" . }}
{{- $_ := set $env "GOMEMLIMIT" (dict "name" "GOMEMLIMIT" "value" .) }}
{{- end }}
{{- if not $v.nats.urls }}
{{- $_ := set $env "RELAY_NATS_DATA_DIR" (dict "name" "RELAY_NATS_DATA_DIR" "value" (include "kube-nats-relay.dataDir" .)) }}
{{- $_ := set $env "RELAY_NATS_LISTEN" (dict "name" "RELAY_NATS_LISTEN" "value" (include "kube-nats-relay.embeddedListen" .)) }}
{{- end }}
{{- with $v.nats.auth }}
{{- if .existingSecret }}
{{- range $name, $key := dict "RELAY_NATS_USER" .userKey "RELAY_NATS_PASSWORD" .passwordKey "RELAY_NATS_TOKEN" .tokenKey }}
{{- if $key }}{{ $_ := set $env $name (dict "name" $name "valueFrom" (dict "secretKeyRef" (dict "name" $v.nats.auth.existingSecret "key" $key))) }}{{ end }}
{{- end }}
{{- range $name, $key := dict "RELAY_NATS_CREDS" .credsKey "RELAY_NATS_NKEY" .nkeyKey }}
{{- if $key }}{{ $_ := set $env $name (dict "name" $name "value" (printf "%s/%s" (include "kube-nats-relay.natsAuthDir" $) $key)) }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- with $v.nats.tls }}
{{- if .existingSecret }}
{{- range $name, $key := dict "RELAY_NATS_TLS_CA" .caKey "RELAY_NATS_TLS_CERT" .certKey "RELAY_NATS_TLS_KEY" .keyKey }}
{{- if $key }}{{ $_ := set $env $name (dict "name" $name "value" (printf "%s/%s" (include "kube-nats-relay.natsTLSDir" $) $key)) }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- if $v.kubeconfig.existingSecret }}
{{- $_ := set $env "KUBECONFIG" (dict "name" "KUBECONFIG" "value" (printf "%s/%s" (include "kube-nats-relay.kubeconfigDir" .) $v.kubeconfig.key)) }}
{{- end }}
{{- if $v.rules }}
{{- $_ := set $env "RELAY_RULES_FILE" (dict "name" "RELAY_RULES_FILE" "value" (printf "%s/rules.yaml" (include "kube-nats-relay.rulesDir" .))) }}
{{- end }}
{{- $le := include "kube-nats-relay.leaderElect" . }}
{{- $_ := set $env "RELAY_LEADER_ELECT" (dict "name" "RELAY_LEADER_ELECT" "value" $le) }}
{{- if eq $le "true" }}
{{- if $v.leaderElection.namespace }}
{{- $_ := set $env "RELAY_LEADER_ELECTION_NAMESPACE" (dict "name" "RELAY_LEADER_ELECTION_NAMESPACE" "value" $v.leaderElection.namespace) }}
{{- else }}
{{- $_ := set $env "RELAY_LEADER_ELECTION_NAMESPACE" (dict "name" "RELAY_LEADER_ELECTION_NAMESPACE" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.namespace"))) }}
{{- end }}
{{- $_ := set $env "RELAY_LEADER_ELECTION_LEASE" (dict "name" "RELAY_LEADER_ELECTION_LEASE" "value" (include "kube-nats-relay.leaseName" .)) }}
{{- range $name, $s := dict "RELAY_LEASE_DURATION" $v.leaderElection.leaseDuration "RELAY_RENEW_DEADLINE" $v.leaderElection.renewDeadline "RELAY_RETRY_PERIOD" $v.leaderElection.retryPeriod }}
{{- if $s }}{{ $_ := set $env $name (dict "name" $name "value" (toString $s)) }}{{ end }}
{{- end }}
{{- end }}
{{- range $name, $value := $v.env }}
{{- $_ := set $env $name (dict "name" $name "value" (toString $value)) }}
{{- end }}
{{- range $v.extraEnv }}
{{- $_ := set $env .name . }}
{{- end }}
{{- toYaml $env }}
{{- end }}
