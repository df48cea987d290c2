package bench

import (
	"fmt"
	"strings"
	"time"
)

// Status churn of the pods scenario: two kwok stages make every Pod of the Deployment cycle,
// as a kubelet reports a container that fails its liveness probe and is restarted:
//
//   - bench-pod-restart: a Running, Ready Pod has its app container restarted (restartCount
//     + 1, lastState terminated with exit code 137, a new startedAt) and turns not Ready;
//   - bench-pod-ready: a Running Pod that is not Ready turns Ready again, as its readiness
//     probe passes.
//
// Each is one status write the kubelet would make, each wakes the ReplicaSet and Deployment
// controllers (their ready and available counts change), and each reaches the relay as one
// MODIFIED Pod: the churn of a cluster with flapping probes or crash-looping containers, the
// Pod updates most common after scheduling. A rolling update would also churn, but its
// creates and deletes test the scheduler more than the relay, and 10,000 Pods replaced take
// far longer than a window.
//
// kwok waits a random delay between a stage's durationMilliseconds and its
// jitterDurationMilliseconds before applying it; churnSchedule chooses them from the period.

// churnSchedule is how long a Pod stays Ready and not Ready, each between a minimum and a
// maximum (uniformly, as kwok draws it).
type churnSchedule struct {
	ReadyMin, ReadyMax     time.Duration
	UnreadyMin, UnreadyMax time.Duration
}

const (
	// churnUnreadyShare is the share of a cycle a Pod spends not Ready: a restarted container
	// becomes ready again after its readiness probe passes, a few seconds against the
	// minutes a healthy one runs.
	churnUnreadyShare = 0.2
	// churnJitter spreads each delay from its mean by this share either way, so that the
	// Pods, all started within seconds of each other, do not flip in lockstep.
	churnJitter = 0.5
)

// newChurnSchedule returns the schedule whose mean cycle (Ready, then not Ready) is period.
func newChurnSchedule(period time.Duration) churnSchedule {
	spread := func(mean time.Duration) (time.Duration, time.Duration) {
		d := time.Duration(float64(mean) * churnJitter)
		return mean - d, mean + d
	}
	unready := time.Duration(float64(period) * churnUnreadyShare)
	var s churnSchedule
	s.ReadyMin, s.ReadyMax = spread(period - unready)
	s.UnreadyMin, s.UnreadyMax = spread(unready)
	return s
}

// cycle is the mean time of one cycle.
func (s churnSchedule) cycle() time.Duration {
	return (s.ReadyMin + s.ReadyMax + s.UnreadyMin + s.UnreadyMax) / 2
}

// rate is the Pod updates per second the schedule asks of pods Pods once they all cycle: two
// per cycle. The cluster may sustain less; the scenario reports what it achieved.
func (s churnSchedule) rate(pods int) float64 {
	if s.cycle() <= 0 {
		return 0
	}
	return 2 * float64(pods) / s.cycle().Seconds()
}

// stages returns the kwok Stage documents of the schedule.
func (s churnSchedule) stages() []string {
	return []string{
		fmt.Sprintf(restartStage, churnLabel, s.ReadyMin.Milliseconds(), s.ReadyMax.Milliseconds()),
		fmt.Sprintf(readyStage, churnLabel, s.UnreadyMin.Milliseconds(), s.UnreadyMax.Milliseconds()),
	}
}

// churnSelector selects the Running, live Pods that carry the churn label; %[1]s is the label
// and the Ready condition's status is appended by each stage.
const churnSelector = `  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.labels["%[1]s"]'
      operator: 'In'
      values: ['true']
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
`

// stageDelay is a stage's delay; %[2]d and %[3]d are the minimum and maximum milliseconds.
const stageDelay = `  delay:
    durationMilliseconds: %[2]d
    jitterDurationMilliseconds: %[3]d
`

// restartStage restarts the first container of a Ready Pod and turns it not Ready. Container
// statuses are a list the apiserver replaces as a whole, so every container is written,
// the others as they were.
var restartStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: bench-pod-restart
spec:
` + churnSelector + `      values: ['True']
` + stageDelay + `  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $root := . }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        message: 'containers with unready status: [app]'
        reason: ContainersNotReady
        status: "False"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        message: 'containers with unready status: [app]'
        reason: ContainersNotReady
        status: "False"
        type: ContainersReady
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      {{ $origin := index $root.status.containerStatuses $index }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        started: true
      {{ if eq $index 0 }}
        ready: false
        restartCount: {{ add1 $origin.restartCount }}
        lastState:
          terminated:
            exitCode: 137
            reason: Error
            message: 'Liveness probe failed: HTTP probe failed with statuscode: 503'
            startedAt: {{ $origin.state.running.startedAt | Quote }}
            finishedAt: {{ $now | Quote }}
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ else }}
        ready: true
        restartCount: {{ $origin.restartCount }}
        lastState: {{ $origin.lastState | toJson }}
        state: {{ $origin.state | toJson }}
      {{ end }}
      {{ end }}
`

// readyStage turns a Pod that is not Ready Ready again, its containers as they were.
var readyStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: bench-pod-ready
spec:
` + churnSelector + `      values: ['False']
` + stageDelay + `  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $root := . }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      {{ $origin := index $root.status.containerStatuses $index }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        started: true
        ready: true
        restartCount: {{ $origin.restartCount }}
        lastState: {{ $origin.lastState | toJson }}
        state: {{ $origin.state | toJson }}
      {{ end }}
`

// stageNames returns the metadata.name of each stage document, for tests and logs.
func stageNames(docs []string) []string {
	var out []string
	for _, d := range docs {
		for _, line := range strings.Split(d, "\n") {
			if name, ok := strings.CutPrefix(line, "  name: "); ok {
				out = append(out, name)
				break
			}
		}
	}
	return out
}
