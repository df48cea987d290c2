package consumer

import (
	"fmt"
	"strconv"
)

// CompareResourceVersions compares two resourceVersions of objects of one resource (one
// group and resource, in one cluster) as Kubernetes defines them since 1.35: as unsigned
// integers. It returns -1 when a is older than b, 0 when they are equal and +1 when a is
// newer. A value that is not a canonical decimal integer (empty, signed, with a leading zero
// or not a number) is an error wrapping ErrInvalidResourceVersion: never compare such values
// as strings, and never compare resourceVersions of different resources.
func CompareResourceVersions(a, b string) (int, error) {
	x, err := ParseResourceVersion(a)
	if err != nil {
		return 0, err
	}
	y, err := ParseResourceVersion(b)
	if err != nil {
		return 0, err
	}
	switch {
	case x < y:
		return -1, nil
	case x > y:
		return 1, nil
	}
	return 0, nil
}

// ParseResourceVersion returns the integer a resourceVersion stands for. Kubernetes writes a
// resourceVersion as a decimal integer without sign or leading zero; anything else, "0"
// included (a request parameter meaning "any", never an object's version), is an error
// wrapping ErrInvalidResourceVersion.
func ParseResourceVersion(rv string) (uint64, error) {
	if rv == "" || rv[0] == '0' || rv[0] == '+' {
		return 0, fmt.Errorf("resourceVersion %q: %w", rv, ErrInvalidResourceVersion)
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q: %w", rv, ErrInvalidResourceVersion)
	}
	return n, nil
}
