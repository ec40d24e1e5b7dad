package main

import (
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/rans"
)

// TestDecodeLoop: --decode-loop names a loop by its prefix; an unknown
// name is refused with the loops this machine runs.
func TestDecodeLoop(t *testing.T) {
	for _, tc := range []struct {
		name, want string // want "": the zero Loop; "error": refused
	}{
		{"", ""},
		{"go", "go"},
		{"Scalar", "scalar C (cgo)"},
		{"avx9", "error"},
	} {
		l, err := decodeLoop(tc.name)
		switch {
		case tc.want == "error":
			if err == nil || !strings.Contains(err.Error(), "this machine runs go") {
				t.Errorf("%q: %v, want an error listing the loops", tc.name, err)
			}
		case err != nil:
			if !strings.Contains(tc.want, "cgo") || len(rans.Loops()) > 1 {
				t.Errorf("%q: %v", tc.name, err)
			}
		case tc.want == "" && l.String() != rans.Loop{}.String(), tc.want != "" && l.String() != tc.want:
			t.Errorf("%q: loop %v, want %q", tc.name, l, tc.want)
		}
	}
}
