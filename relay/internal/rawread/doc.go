// Package rawread lists and watches Kubernetes resources in one pass over each response, for
// the relay's sources.
//
// Readers share one HTTP client and one client-side rate limiter, like client-go's dynamic
// client, but decode the JSON of a list page or a watch event once, straight into the maps of
// unstructured objects. With AsRead a Reader does not decode objects at all: a structural
// scanner (jsonscan.go) finds each object's identity (apiVersion, kind, name, namespace, uid,
// resourceVersion) and its body is the apiserver's bytes less managedFields and the kubectl
// last-applied annotation, ready to publish.
//
// What it guarantees: a body read as is decodes to what decoding the object and removing the
// same members would give (fuzz-tested against encoding/json); a watch stream that cannot be
// decoded ends with an ERROR event carrying a Status, as client-go's StreamWatcher does; errors
// from the apiserver come back typed (apierrors reads them). What it does not: validate
// numbers and literals inside bodies it does not decode (its input is the apiserver's own
// encoding), or retry anything.
package rawread
