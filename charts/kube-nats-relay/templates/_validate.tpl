{{/*
Render-time checks: every value the relay would refuse at start (exit 2, the pod crash-looping
while `helm upgrade` without --wait reports success) and every value the chart would otherwise
ignore fails the render instead, naming the value. values.schema.json checks types, enums,
patterns and the numeric ranges of numbers; these checks cover what a schema cannot say: the
ranges of durations, quantities and numbers written as strings, rules between values, and the
environment as the pod gets it (env and extraEnv override the structured values).
*/}}

{{/*
kube-nats-relay.relayRanges: the relay's range of each numeric or duration variable (the
configRanges table of cmd/relay, whose test compares the two), with the value that sets it and
the relay's default where a rule between values needs it. zero: 0 is accepted too.
*/}}
{{- define "kube-nats-relay.relayRanges" -}}
RELAY_KUBE_QPS: {value: relay.kubeQPS, type: number, min: "1", max: "10000"}
RELAY_KUBE_BURST: {value: relay.kubeBurst, type: integer, min: "1", max: "10000"}
RELAY_STREAM_REPLICAS: {value: relay.streamReplicas, type: integer, min: "1", max: "5", default: "1"}
RELAY_DUPLICATE_WINDOW: {value: relay.duplicateWindow, type: duration, min: 100ms, max: 24h, default: 10m}
RELAY_MAX_AGE: {value: relay.maxAge, type: duration, min: 100ms, max: 87600h, zero: unlimited, default: "0"}
RELAY_CHECKPOINT_INTERVAL: {value: relay.checkpointInterval, type: duration, min: 100ms, max: 1m}
RELAY_BUFFER_SIZE: {value: relay.bufferSize, type: integer, min: "1", max: "65536"}
RELAY_MAX_INFLIGHT: {value: relay.maxInflight, type: integer, min: "1", max: "4096"}
RELAY_SHUTDOWN_TIMEOUT: {value: relay.shutdownTimeout, type: duration, min: 1s, max: 5m, default: 8s}
RELAY_LEASE_DURATION: {value: leaderElection.leaseDuration, type: duration, min: 1s, max: 5m, default: 15s}
RELAY_RENEW_DEADLINE: {value: leaderElection.renewDeadline, type: duration, min: 100ms, max: 5m, default: 10s}
RELAY_RETRY_PERIOD: {value: leaderElection.retryPeriod, type: duration, min: 100ms, max: 5m, default: 2s}
RELAY_MEMORY_BUDGET: {value: relay.memoryBudget, type: quantity, min: 1Mi, max: 1Ti}
RELAY_MAX_BYTES: {value: relay.maxBytes, type: quantity, min: 1Mi, max: 1Pi, zero: unlimited}
{{- end }}

{{/*
kube-nats-relay.durationNs: a duration in Go's syntax (time.ParseDuration: "1h30m", "1.5s",
"-2m", "0") as nanoseconds, exactly as Go computes them; "invalid" when Go would not parse it,
"overflow" beyond int64 (Go refuses those too).
*/}}
{{- define "kube-nats-relay.durationNs" -}}
{{- $s := toString . }}
{{- $item := "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)" }}
{{- if not (regexMatch (printf "^[-+]?(0|(%s)+)$" $item) $s) }}invalid
{{- else }}
{{- $units := dict "ns" 1 "us" 1000 "µs" 1000 "μs" 1000 "ms" 1000000 "s" 1000000000 "m" 60000000000 "h" 3600000000000 }}
{{- $maxInt64 := 9223372036854775807 }}
{{- $total := 0 }}
{{- $over := false }}
{{- range regexFindAll $item $s -1 }}
{{- $num := regexReplaceAll "^([0-9.]*).*$" . "${1}" }}
{{- $unit := get $units (trimPrefix $num .) | int64 }}
{{- $parts := splitList "." $num }}
{{- $whole := regexReplaceAll "^0+" (first $parts) "" }}
{{- $n := 0 }}
{{- if gt (len $whole) 18 }}{{ $over = true }}{{ else if $whole }}{{ $n = atoi $whole }}{{ end }}
{{- if gt (int64 $n) (div $maxInt64 $unit) }}{{ $over = true }}{{ end }}
{{- $part := mul $n $unit }}
{{- /* Go adds the fraction as float64(f) * (float64(unit) / scale), truncated. */}}
{{- $frac := "" }}
{{- if gt (len $parts) 1 }}{{ $frac = last $parts | trunc 15 }}{{ end }}
{{- if $frac }}
{{- $scale := 1 }}
{{- range until (len $frac) }}{{ $scale = mul $scale 10 }}{{ end }}
{{- $part = add $part (int64 (mulf (atoi $frac) (divf $unit $scale))) }}
{{- end }}
{{- if and (not $over) (gt (int64 $part) (sub $maxInt64 $total)) }}{{ $over = true }}{{ end }}
{{- if not $over }}{{ $total = add $total $part }}{{ end }}
{{- end }}
{{- if $over }}overflow
{{- else if hasPrefix "-" $s }}{{ sub 0 $total }}
{{- else }}{{ $total }}
{{- end }}
{{- end }}
{{- end }}

{{/*
kube-nats-relay.quantityBytes: a Kubernetes quantity ("64Mi", "1G", "1e6", "268435456") as a
number of bytes (a float, exact within the relay's range); "invalid" when it is none.
*/}}
{{- define "kube-nats-relay.quantityBytes" -}}
{{- $s := toString . }}
{{- $re := "^([+-]?)([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$" }}
{{- if not (regexMatch $re $s) }}invalid
{{- else }}
{{- $units := dict "" 1.0 "n" 1e-9 "u" 1e-6 "m" 1e-3 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- $suffix := regexReplaceAll $re $s "${4}" }}
{{- $mult := 1.0 }}
{{- if hasKey $units $suffix }}{{ $mult = get $units $suffix }}
{{- else }}{{ $mult = float64 (printf "1%s" $suffix) }}
{{- end }}
{{- mulf (float64 (regexReplaceAll $re $s "${1}${2}")) $mult }}
{{- end }}
{{- end }}

{{/*
kube-nats-relay.checkRange: the problem of one variable's value against its range entry, or
nothing. Arguments: dict "var" name "entry" the relayRanges entry "raw" the value.
*/}}
{{- define "kube-nats-relay.checkRange" -}}
{{- $e := .entry }}
{{- $raw := .raw }}
{{- $name := printf "%s (%s) %q" $e.value .var $raw }}
{{- $range := printf "must be between %s and %s" $e.min $e.max }}
{{- if $e.zero }}{{ $range = printf "must be 0 (%s) or %s to %s" $e.zero $e.min $e.max }}{{ end }}
{{- if eq $e.type "integer" }}
{{- if not (regexMatch "^[+-]?[0-9]+$" $raw) }}{{ printf "%s: not an integer" $name }}
{{- else }}
{{- $digits := regexReplaceAll "^[+-]?0*" $raw "" }}
{{- if or (gt (len $digits) 18) (lt (atoi $raw) (atoi $e.min)) (gt (atoi $raw) (atoi $e.max)) }}{{ printf "%s: %s" $name $range }}{{ end }}
{{- end }}
{{- else if eq $e.type "number" }}
{{- if not (regexMatch "^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?$" $raw) }}{{ printf "%s: not a number" $name }}
{{- else if or (lt (float64 $raw) (float64 $e.min)) (gt (float64 $raw) (float64 $e.max)) }}{{ printf "%s: %s" $name $range }}
{{- end }}
{{- else if eq $e.type "duration" }}
{{- $ns := include "kube-nats-relay.durationNs" $raw }}
{{- if eq $ns "invalid" }}{{ printf "%s: not a duration: a number with a unit, such as 500ms, 30s or 10m" $name }}
{{- else if and $e.zero (eq $ns "0") }}
{{- else if or (eq $ns "overflow") (lt (int64 $ns) (int64 (include "kube-nats-relay.durationNs" $e.min))) (gt (int64 $ns) (int64 (include "kube-nats-relay.durationNs" $e.max))) }}{{ printf "%s: %s" $name $range }}
{{- end }}
{{- else if eq $e.type "quantity" }}
{{- $b := include "kube-nats-relay.quantityBytes" $raw }}
{{- if eq $b "invalid" }}{{ printf "%s: not a quantity: bytes with an optional suffix, such as 64Mi or 1G" $name }}
{{- else if ne (floor $b) (float64 $b) }}{{ printf "%s: not a whole number of bytes" $name }}
{{- else if and $e.zero (eq (float64 $b) 0.0) }}
{{- else if or (lt (float64 $b) (float64 (include "kube-nats-relay.quantityBytes" $e.min))) (gt (float64 $b) (float64 (include "kube-nats-relay.quantityBytes" $e.max))) }}{{ printf "%s: %s" $name $range }}
{{- end }}
{{- end }}
{{- end }}

{{/*
kube-nats-relay.effectiveDuration: the nanoseconds of a duration variable as the pod gets it
(its rendered value, else the relay's default); "" when it comes from a Secret or ConfigMap.
Arguments: dict "env" the rendered environment "var" name "ranges" the relayRanges.
*/}}
{{- define "kube-nats-relay.effectiveDuration" -}}
{{- $e := get .env .var }}
{{- if not $e }}{{ include "kube-nats-relay.durationNs" (get (get .ranges .var) "default") }}
{{- else if hasKey $e "value" }}{{ include "kube-nats-relay.durationNs" (toString $e.value) }}
{{- end }}
{{- end }}

{{/* kube-nats-relay.validate: fails the render with every problem found, one per line. */}}
{{- define "kube-nats-relay.validate" -}}
{{- $v := .Values }}
{{- $problems := list }}
{{- $env := include "kube-nats-relay.env" . | fromYaml }}
{{- $ranges := include "kube-nats-relay.relayRanges" . | fromYaml }}
{{- $value := dict }}
{{- range $name, $e := $env }}
{{- if hasKey $e "value" }}{{ $_ := set $value $name (toString $e.value) }}{{ end }}
{{- end }}

{{- /* Ranges, on the values as the pod gets them. */}}
{{- range $var := keys $ranges | sortAlpha }}
{{- if hasKey $value $var }}
{{- with include "kube-nats-relay.checkRange" (dict "var" $var "entry" (get $ranges $var) "raw" (get $value $var)) }}{{ $problems = append $problems . }}{{ end }}
{{- end }}
{{- end }}

{{- /* Rules between durations, as the relay states them (cmd/relay), once each is in range. */}}
{{- $ns := dict }}
{{- range $var := list "RELAY_LEASE_DURATION" "RELAY_RENEW_DEADLINE" "RELAY_RETRY_PERIOD" "RELAY_DUPLICATE_WINDOW" "RELAY_MAX_AGE" "RELAY_SHUTDOWN_TIMEOUT" }}
{{- $d := include "kube-nats-relay.effectiveDuration" (dict "env" $env "var" $var "ranges" $ranges) }}
{{- if and $d (not (has $d (list "invalid" "overflow"))) }}{{ $_ := set $ns $var (int64 $d) }}{{ end }}
{{- end }}
{{- $show := dict }}
{{- range $var := keys $ns }}
{{- if hasKey $value $var }}{{ $_ := set $show $var (get $value $var | quote) }}
{{- else }}{{ $_ := set $show $var (printf "%s (the relay's default)" (get (get $ranges $var) "default")) }}
{{- end }}
{{- end }}
{{- if and (hasKey $ns "RELAY_RENEW_DEADLINE") (hasKey $ns "RELAY_RETRY_PERIOD") }}
{{- $renew := $ns.RELAY_RENEW_DEADLINE }}
{{- $retry := $ns.RELAY_RETRY_PERIOD }}
{{- if le (mul 5 $renew) (mul 6 $retry) }}
{{- $problems = append $problems (printf "leaderElection.renewDeadline (RELAY_RENEW_DEADLINE) %s: must exceed 1.2 x leaderElection.retryPeriod (RELAY_RETRY_PERIOD) %s: a renewal needs at least one retry" $show.RELAY_RENEW_DEADLINE $show.RELAY_RETRY_PERIOD) }}
{{- else if and (hasKey $ns "RELAY_LEASE_DURATION") (ge (add $renew $retry) $ns.RELAY_LEASE_DURATION) }}
{{- $problems = append $problems (printf "leaderElection.renewDeadline (RELAY_RENEW_DEADLINE) %s + leaderElection.retryPeriod (RELAY_RETRY_PERIOD) %s must be less than leaderElection.leaseDuration (RELAY_LEASE_DURATION) %s: a leader that cannot renew must stop before another may take the Lease" $show.RELAY_RENEW_DEADLINE $show.RELAY_RETRY_PERIOD $show.RELAY_LEASE_DURATION) }}
{{- end }}
{{- end }}
{{- if and (hasKey $ns "RELAY_DUPLICATE_WINDOW") (hasKey $ns "RELAY_MAX_AGE") (gt $ns.RELAY_MAX_AGE 0) (gt $ns.RELAY_DUPLICATE_WINDOW $ns.RELAY_MAX_AGE) }}
{{- $problems = append $problems (printf "relay.duplicateWindow (RELAY_DUPLICATE_WINDOW) %s: must not exceed relay.maxAge (RELAY_MAX_AGE) %s: a stream cannot keep event ids longer than the events" $show.RELAY_DUPLICATE_WINDOW $show.RELAY_MAX_AGE) }}
{{- end }}
{{- if hasKey $ns "RELAY_SHUTDOWN_TIMEOUT" }}
{{- $grace := mul (int64 $v.terminationGracePeriodSeconds) 1000000000 }}
{{- if ge $ns.RELAY_SHUTDOWN_TIMEOUT $grace }}
{{- $problems = append $problems (printf "relay.shutdownTimeout (RELAY_SHUTDOWN_TIMEOUT) %s: must be less than terminationGracePeriodSeconds (%v): the kubelet kills the relay at the grace period, before its final publishes and checkpoints" $show.RELAY_SHUTDOWN_TIMEOUT $v.terminationGracePeriodSeconds) }}
{{- end }}
{{- end }}
{{- $embedded := not $v.nats.urls }}
{{- if and $embedded (hasKey $value "RELAY_STREAM_REPLICAS") (regexMatch "^[+-]?[0-9]+$" (get $value "RELAY_STREAM_REPLICAS")) (gt (atoi (get $value "RELAY_STREAM_REPLICAS")) 1) }}
{{- $problems = append $problems (printf "relay.streamReplicas (RELAY_STREAM_REPLICAS) %q: must be 1 with the embedded nats-server (nats.urls is empty)" (get $value "RELAY_STREAM_REPLICAS")) }}
{{- end }}

{{- $clusterName := get $value "RELAY_CLUSTER" | default "default" }}
{{- $indexBucket := get $value "RELAY_INDEX_BUCKET" | default (printf "kube-relay-index-%s" $clusterName) }}
{{- if eq $indexBucket (get $value "RELAY_CHECKPOINT_BUCKET" | default (printf "kube-relay-checkpoints-%s" $clusterName)) }}
{{- $problems = append $problems (printf "relay.indexBucket (RELAY_INDEX_BUCKET) %q: must differ from relay.checkpointBucket (RELAY_CHECKPOINT_BUCKET)" $indexBucket) }}
{{- end }}

{{- if and (get $value "RELAY_JS_DOMAIN") (get $value "RELAY_JS_API_PREFIX") }}
{{- $problems = append $problems (printf "nats.jetstream.apiPrefix (RELAY_JS_API_PREFIX) %q: conflicts with nats.jetstream.domain (RELAY_JS_DOMAIN) %q: set a JetStream domain or an API prefix, not both" (get $value "RELAY_JS_API_PREFIX") (get $value "RELAY_JS_DOMAIN")) }}
{{- end }}
{{- if and $embedded (get $value "RELAY_JS_API_PREFIX") }}
{{- $problems = append $problems (printf "nats.jetstream.apiPrefix (RELAY_JS_API_PREFIX) %q: the embedded nats-server (nats.urls empty) imports no JetStream API: unset it, or set nats.urls" (get $value "RELAY_JS_API_PREFIX")) }}
{{- end }}

{{- /* NATS URLs: what nats.Connect and the relay accept. */}}
{{- $plain := false }}
{{- $websocket := false }}
{{- range (get $value "NATS_URL" | default "" | splitList ",") }}
{{- $u := trim . }}
{{- if $u }}
{{- /* As the relay reads it: without a scheme, nats://. */}}
{{- $s := ternary $u (printf "nats://%s" $u) (contains "://" $u) }}
{{- $shown := regexReplaceAll "//[^/@]*@" $u "//<redacted>@" }}
{{- /* Read by hand, not with urlParse, whose errors would quote a password. */}}
{{- $hostport := regexReplaceAll "^.*@" (regexReplaceAll "^[^:]*://([^/?#]*).*$" $s "${1}") "" }}
{{- $hostname := regexReplaceAll "^\\[([^\\]]*)\\].*$|:.*$" $hostport "${1}" }}
{{- $port := trimPrefix ":" (regexReplaceAll "^\\[[^\\]]*\\]|^[^:\\[]*" $hostport "") }}
{{- $scheme := regexReplaceAll "://.*$" $s "" }}
{{- if not $hostname }}{{ $problems = append $problems (printf "nats.urls (NATS_URL) %q: not a URL with a host" $shown) }}
{{- else if and $port (or (not (regexMatch "^[0-9]{1,5}$" $port)) (lt (atoi $port) 1) (gt (atoi $port) 65535)) }}{{ $problems = append $problems (printf "nats.urls (NATS_URL) %q: port must be a number from 1 to 65535" $shown) }}
{{- else if has $scheme (list "nats" "tls") }}{{ $plain = true }}
{{- else if has $scheme (list "ws" "wss") }}{{ $websocket = true }}
{{- else }}{{ $problems = append $problems (printf "nats.urls (NATS_URL) %q: scheme %q: must be nats, tls, ws or wss (the NATS client protocol, not HTTP)" $shown $scheme) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $plain $websocket }}
{{- $problems = append $problems "nats.urls (NATS_URL): cannot mix websocket (ws, wss) and plain (nats, tls) URLs" }}
{{- end }}
{{- if and (not $v.nats.urls) (hasKey $env "NATS_URL") }}
{{- $problems = append $problems "env/extraEnv set NATS_URL but nats.urls is empty: the chart sets the pod up for the embedded nats-server (leader election off, Recreate, no NATS egress in the NetworkPolicy); set nats.urls too (extraEnv may still override it, e.g. from a Secret)" }}
{{- end }}

{{- /* The probes, the Service and the NetworkPolicy reach the relay at http.port. */}}
{{- if ne (get $value "RELAY_HTTP_ADDR" | default "") (printf ":%d" (int $v.http.port)) }}
{{- $problems = append $problems (printf "env/extraEnv set RELAY_HTTP_ADDR, but the probes, the Service and the NetworkPolicy use http.port (%d): set http.port instead" (int $v.http.port)) }}
{{- end }}

{{- /* Credentials: keys without their Secret are ignored, and the relay takes one method. */}}
{{- with $v.nats.auth }}
{{- $keys := list }}
{{- range $k := list "userKey" "passwordKey" "tokenKey" "credsKey" "nkeyKey" }}{{ if get $v.nats.auth $k }}{{ $keys = append $keys $k }}{{ end }}{{ end }}
{{- if and $keys (not .existingSecret) }}
{{- $problems = append $problems (printf "nats.auth.%s is set but nats.auth.existingSecret is empty: the key names an entry of that Secret, and without it the relay would connect without credentials" (join ", nats.auth." $keys)) }}
{{- end }}
{{- if and .existingSecret (not $keys) }}
{{- $problems = append $problems (printf "nats.auth.existingSecret %q names no key: set userKey and passwordKey, tokenKey, credsKey or nkeyKey" .existingSecret) }}
{{- end }}
{{- if and .userKey (not .passwordKey) }}
{{- $problems = append $problems (printf "nats.auth.userKey %q needs nats.auth.passwordKey: the relay refuses a user without a password" .userKey) }}
{{- end }}
{{- if and .passwordKey (not .userKey) }}
{{- $problems = append $problems (printf "nats.auth.passwordKey %q needs nats.auth.userKey: the relay refuses a password without a user" .passwordKey) }}
{{- end }}
{{- $methods := list }}
{{- if or .userKey .passwordKey }}{{ $methods = append $methods "userKey and passwordKey" }}{{ end }}
{{- range $k := list "tokenKey" "credsKey" "nkeyKey" }}{{ if get $v.nats.auth $k }}{{ $methods = append $methods $k }}{{ end }}{{ end }}
{{- if gt (len $methods) 1 }}
{{- $problems = append $problems (printf "nats.auth: %s are set: the relay takes one NATS authentication method" (join ", " $methods)) }}
{{- end }}
{{- end }}
{{- with $v.nats.tls }}
{{- $keys := list }}
{{- range $k := list "caKey" "certKey" "keyKey" }}{{ if get $v.nats.tls $k }}{{ $keys = append $keys $k }}{{ end }}{{ end }}
{{- if and $keys (not .existingSecret) }}
{{- $problems = append $problems (printf "nats.tls.%s is set but nats.tls.existingSecret is empty: the key names an entry of that Secret, and without it TLS would be off" (join ", nats.tls." $keys)) }}
{{- end }}
{{- if and .existingSecret (not $keys) }}
{{- $problems = append $problems (printf "nats.tls.existingSecret %q names no key: set caKey, or certKey and keyKey (TLS would silently stay off)" .existingSecret) }}
{{- end }}
{{- if and .certKey (not .keyKey) }}
{{- $problems = append $problems (printf "nats.tls.certKey %q needs nats.tls.keyKey" .certKey) }}
{{- end }}
{{- if and .keyKey (not .certKey) }}
{{- $problems = append $problems (printf "nats.tls.keyKey %q needs nats.tls.certKey" .keyKey) }}
{{- end }}
{{- end }}

{{- /* Mirror resources must be relayed, spelled as relayed; rules name each resource once. */}}
{{- $relayed := get $value "RELAY_RESOURCES" | default "" | splitList "," | compact }}
{{- $ruled := list }}
{{- if kindIs "map" $v.rules }}
{{- range ($v.rules.resources | default list) }}
{{- if and (kindIs "map" .) .resource }}
{{- if has .resource $ruled }}
{{- $problems = append $problems (printf "rules.resources: %q is listed more than once" .resource) }}
{{- end }}
{{- $ruled = append $ruled .resource }}
{{- end }}
{{- end }}
{{- end }}
{{- range (get $value "RELAY_MIRROR_RESOURCES" | default "" | splitList ",") }}
{{- $m := trim . }}
{{- if and $m (not (has $m (concat $relayed $ruled))) }}
{{- $problems = append $problems (printf "relay.mirrorResources (RELAY_MIRROR_RESOURCES) %q: not relayed: mirror only resources of relay.resources or rules, spelled the same way" $m) }}
{{- end }}
{{- end }}

{{- /* The PodDisruptionBudget takes one of minAvailable and maxUnavailable. */}}
{{- with $v.podDisruptionBudget }}
{{- if .enabled }}
{{- $min := and (hasKey . "minAvailable") (ne (toString .minAvailable) "<nil>") (ne (toString .minAvailable) "") }}
{{- $max := and (hasKey . "maxUnavailable") (ne (toString .maxUnavailable) "<nil>") (ne (toString .maxUnavailable) "") }}
{{- if and $min $max }}
{{- $problems = append $problems (printf "podDisruptionBudget.minAvailable (%v) and podDisruptionBudget.maxUnavailable (%v) are both set: a PodDisruptionBudget takes one; set podDisruptionBudget.maxUnavailable=null to use minAvailable" .minAvailable .maxUnavailable) }}
{{- else if not (or $min $max) }}
{{- $problems = append $problems "podDisruptionBudget: set minAvailable or maxUnavailable, or enabled=false" }}
{{- end }}
{{- end }}
{{- end }}

{{- if $problems }}
{{- fail (printf "invalid values (the relay would refuse them at start, or the chart would ignore them):\n- %s" (join "\n- " $problems)) }}
{{- end }}
{{- end }}
