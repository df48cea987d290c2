package consumer_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
)

func TestCompareResourceVersionsComparesAsIntegers(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want int
	}{
		{name: "equal", a: "215", b: "215", want: 0},
		{name: "older", a: "215", b: "216", want: -1},
		{name: "newer", a: "216", b: "215", want: 1},
		// A string comparison gets these wrong.
		{name: "more digits is newer", a: "1000", b: "999", want: 1},
		{name: "fewer digits is older", a: "99", b: "100", want: -1},
		{name: "largest uint64", a: "18446744073709551615", b: "18446744073709551614", want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := consumer.CompareResourceVersions(tt.a, tt.b)
			if err != nil {
				t.Fatalf("CompareResourceVersions(%q, %q): %v", tt.a, tt.b, err)
			}
			if got != tt.want {
				t.Errorf("CompareResourceVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestCompareResourceVersionsRejectsWhatIsNotAResourceVersion(t *testing.T) {
	for _, rv := range []string{"", "0", "012", "+12", "-12", "12a", "1.5", " 12", "abc", "18446744073709551616"} {
		t.Run(rv, func(t *testing.T) {
			for _, pair := range [][2]string{{rv, "10"}, {"10", rv}} {
				_, err := consumer.CompareResourceVersions(pair[0], pair[1])
				if !errors.Is(err, consumer.ErrInvalidResourceVersion) {
					t.Errorf("CompareResourceVersions(%q, %q) error = %v, want ErrInvalidResourceVersion", pair[0], pair[1], err)
				}
			}
		})
	}
}

func FuzzCompareResourceVersionsIsAnOrder(f *testing.F) {
	f.Add(uint64(9), uint64(10))
	f.Add(uint64(1), uint64(1))
	f.Fuzz(func(t *testing.T, x, y uint64) {
		if x == 0 || y == 0 {
			return
		}
		a, b := strconv.FormatUint(x, 10), strconv.FormatUint(y, 10)
		got, err := consumer.CompareResourceVersions(a, b)
		if err != nil {
			t.Fatalf("CompareResourceVersions(%q, %q): %v", a, b, err)
		}
		want := 0
		if x < y {
			want = -1
		} else if x > y {
			want = 1
		}
		if got != want {
			t.Errorf("CompareResourceVersions(%q, %q) = %d, want %d", a, b, got, want)
		}
		back, _ := consumer.CompareResourceVersions(b, a)
		if back != -got {
			t.Errorf("CompareResourceVersions(%q, %q) = %d, not the opposite of %d", b, a, back, got)
		}
	})
}
