package event

// FilterReason says why the relay's rules suppressed a change. The filter package produces
// them; the relay counts suppressed changes by it (the reason label of
// kube_nats_relay_filtered_total) and logs it.
type FilterReason string

// The reasons. The values are metric label values: keep them.
const (
	// FilterReasonNone goes with a published change.
	FilterReasonNone FilterReason = ""
	// FilterReasonEventType: the rule does not publish this event type.
	FilterReasonEventType FilterReason = "event-type"
	// FilterReasonQuiet: a modified event in which only quiet fields changed.
	FilterReasonQuiet FilterReason = "quiet"
	// FilterReasonWhen: the when expression returned false.
	FilterReasonWhen FilterReason = "when"
)
