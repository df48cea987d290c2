package consumer

import (
	"fmt"
	"reflect"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// DecodeObject decodes the event's object into a new T: a pointer to a typed API object
// (*corev1.Pod), a CRD's Go type (pointer or value), *unstructured.Unstructured, or
// map[string]any. For a pointer type it allocates the value. It decodes the way the API
// machinery does: field names are case-sensitive, and numbers in maps and unstructured
// objects become int64 when they are integers.
//
// It fails with ErrNoObject when the event carries no body, and does not check that T fits
// the event's kind.
func DecodeObject[T any](e Event) (T, error) {
	var obj T
	if len(e.Object) == 0 {
		why := "no body delivered"
		if e.BodyOmitted != "" {
			why = "body omitted by the relay: " + e.BodyOmitted
		}
		return obj, fmt.Errorf("decode object of event %s: %w (%s)", e.ID(), ErrNoObject, why)
	}
	target := any(&obj)
	if v := reflect.ValueOf(&obj).Elem(); v.Kind() == reflect.Pointer {
		v.Set(reflect.New(v.Type().Elem()))
		target = v.Interface()
	}
	if err := utiljson.Unmarshal(e.Object, target); err != nil {
		var zero T
		return zero, fmt.Errorf("decode object of event %s into %T: %w", e.ID(), obj, err)
	}
	return obj, nil
}
