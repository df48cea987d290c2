// Package filter decides which Kubernetes changes the relay publishes and
// in what shape: per-resource rules read from a YAML or JSON file,
// server-side selectors, client-side namespace rules, event types, CEL
// expressions over the new and old object, quiet updates, pruning,
// projection and redaction. It is pure logic: it talks to neither
// Kubernetes nor NATS, and it imports neither the relay engine nor the
// checkpoint package (only the event package's Type and Origin).
//
// # Rules file
//
//	defaults:                 # optional; merged under every rule
//	  excludeNamespaces: [kube-system]
//	resources:
//	  - resource: pods        # kubectl spelling: pods, deployments.apps, widgets.v1.example.com
//	    labelSelector: "app=web"                  # server-side
//	    fieldSelector: "status.phase!=Succeeded"  # server-side
//	    namespaces: [default, prod]               # server-side: one watch per namespace
//	    excludeNamespaces: [kube-system]          # client-side
//	    namespaceSelector: "team=payments"        # client-side, on the Namespace's labels
//	    events: [added, modified, deleted]        # default: all three
//	    when: 'eventType != "modified" || oldObject == null || oldObject.status.phase != object.status.phase'
//	    quietUpdates: true                        # ignore changes of DefaultQuietFields only
//	    quietFields: ["status.conditions[*].lastProbeTime"]  # more quiet fields (implies quietUpdates)
//	    fields: ["spec", "status.phase"]          # projection; IdentityFields are always kept
//	    payload: object                           # object | objectAndOld | objectAndPatch
//	    sensitive: ["spec.token"]                 # redacted like Secret values
//	    stripManagedFields: true                  # default true
//	    stripLastApplied: true                    # default true
//	    derived:                                  # named events derived from changes (not in defaults)
//	      - name: ready                           # DNS label, at most 63 bytes, not a type
//	        condition: 'object.status.?conditions.orValue([]).exists(c, c.type == "Ready" && c.status == "True")'
//	        fields: [status.conditions]           # optional projection of its body
//	  - resource: secrets
//	    redactSecrets: false                      # explicit opt-in to publish Secret values
//
// Parse and Load read it strictly: unknown fields (names match exactly,
// case included), values of the wrong type, YAML or JSON syntax errors
// and duplicate keys are problems. Every problem is collected, not just
// the first: a *ValidationError lists them all, one per line, each naming
// the file, the rule ("defaults", "resources[2] (pods)"), the field
// ("when", "quietFields[1]") and, for CEL expressions and field paths, the
// line and column inside the value; syntax errors carry the file line.
// Checked besides: a resource is required in every rule, absent from
// defaults, spelled like a Kubernetes name (lower case, no "/", DNS
// subdomain syntax; resolving it is the relay's job) and listed once;
// selectors parse; namespaces are DNS labels, listed once, and never both
// included and excluded; event types are known and the list is not empty;
// when compiles and yields bool (or dyn); paths parse; the payload mode is
// known; quietFields is not set while quietUpdates is false; redactSecrets
// is set only on the core secrets rule (not in defaults, so that
// publishing Secret values is always a decision about Secrets).
// namespaces together with namespaceSelector is allowed: both apply.
//
// # Precedence
//
// Every Rule field is a pointer or a slice, nil when unset, so that an
// explicit false, "" or [] differs from unset. A field set in a rule
// overrides the same field of defaults (lists replace, never append), and
// a field set in defaults overrides the built-in default (File.Rules and
// Merge). Built-in defaults, applied by Compile: all namespaces, all event
// types, no when, quiet updates off, no projection, payload object,
// managedFields and the last-applied annotation stripped, Secrets
// redacted.
//
// # Field paths
//
// Paths (ParsePath) are dot-separated map keys; ["any key"] quotes a key
// with dots, slashes or other special characters
// (metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]);
// [*] matches every element of a list and every value of a map. Lists are
// never indexed by position. A path that matches nothing is not an error.
//
// # Compiled rules
//
// Compile turns a merged Rule into a Program for one resolved event.Resource.
// The relay asks the Program, per resource: LabelSelector, FieldSelector
// and ServerNamespaces for its watches; NamespaceSelector, non-nil only
// when it must also watch Namespaces; and per event: Events and Namespace
// (cheap filters before decoding more), Shape, Decide, then Body. A
// Program is immutable and safe for concurrent use; only its error
// counter changes.
//
// Shape strips, then redacts, then projects. It never modifies its input:
// it copies the maps and lists on the way to what it changes and shares
// the rest (copy on write), so both the input and the result are
// read-only afterwards. Redaction replaces a matched map's values with ""
// (keys kept) and any other matched value with "" (null stays null). For
// core Secrets, unless the rule sets redactSecrets: false, every value of
// data and stringData is redacted and the last-applied annotation is
// always removed, because it repeats the data in clear. The same paths are
// redacted inside the annotations that hold a copy of the whole object
// (kubectl's last-applied configuration when the rule keeps it, kapp's
// original, wrangler's applied, k8s-objectmatcher's last-applied), which
// keep their encoding (JSON, gzip or zip in base64), and inside the copies
// nested in those, up to maxManifestDepth deep; such an annotation that
// cannot be decoded, is nested deeper, or that redaction cannot walk
// (kapp's debugging diffs), is dropped whole. Redacted lists the redacted paths for a
// message header. Because redaction happens before
// Decide, a change of a redacted value alone is a change of
// metadata.resourceVersion only: with quiet updates on it is suppressed.
//
// Decide runs, in order: the event-type filter; quiet updates (a modified
// event whose Old is known and equals the object once the quiet fields
// are ignored on both sides is suppressed); the when expression. Change
// holds shaped objects; Old is the object's previous shaped state as the
// relay saw it (published or filtered: the previous state of the object,
// as in Kubernetes' own CEL, and what the relay can re-read at a
// checkpoint after a restart), so a patch covers filtered changes too. A when
// evaluation error publishes the change (fail open: a lost change is
// worse than an extra event), sets Decision.Err, counts in EvalErrors, and
// sets Decision.FirstError once per Program so the relay logs it once per
// rule. Projection hides changes outside the projected fields only when
// quiet updates are on; otherwise such a change is published with just a
// new resourceVersion.
//
// # CEL
//
// when is compiled once. Variables, named like Kubernetes' own CEL:
// object and oldObject (dyn; oldObject is null when the old object is
// unknown, always for added events of a new object), eventType ("added",
// "modified", "deleted") and origin ("live", "initial-sync", "relist").
// Optional field access (object.?status.?phase.orValue("")), comparisons
// between int and double (JSON numbers), and the strings, lists, sets,
// math and two-variable comprehension extensions are available. Selecting
// a missing field is an evaluation error, so guard with has(), the ?
// operator or oldObject == null. Evaluation is cost-limited (celCostLimit)
// and interrupted when Decide's context ends.
//
// # Derived events
//
// Derive decides which derived events a change fires. A condition that does not mention
// oldObject is a state condition: it fires when it holds for the change's object and is not in
// the held set the caller passes (the conditions that held for the previous state, which the
// relay keeps in its object index), and Derivation.Held returns the new set. A condition that
// mentions oldObject is a transition condition: it fires whenever it holds. Conditions compile
// through the same function as when (compileWhen), with the same environment and cost limit.
// An evaluation error leaves the condition as it was (neither fires nor changes the held set).
// DerivedBody projects a derived event's body when it lists fields.
//
// # Payloads
//
// Body encodes the shaped object as JSON (object), as
// {"object": …, "oldObject": …} (objectAndOld), or as
// {"object": …, "patch": …} (objectAndPatch) where patch is the RFC 7386
// JSON merge patch from the old object to the object: changed members
// with their new value, removed members as null, lists replaced whole.
// oldObject and patch are null when the old object is unknown.
//
// # Cost
//
// Selectors, namespaces and event types cost nothing per object. Shape
// costs a few small map copies per event and no memory between events;
// projection makes publishing cheaper. when costs one CEL evaluation per
// event (microseconds) and no memory, unless it mentions oldObject. Only
// NeedsOld features (oldObject in when, quiet updates, objectAndOld and
// objectAndPatch payloads) cost memory: the relay then keeps the last
// seen shaped object of every watched object of that resource, about
// the size of the published body each (projection keeps it small). Every
// other resource keeps only its index entry.
package filter
