package plan

import (
	"fmt"
	"strings"
)

// fmtSscan reads the first integer in s.
func fmtSscan(s string, v any) (int, error) {
	i := strings.IndexAny(s, "0123456789")
	if i < 0 {
		return 0, fmt.Errorf("no number in %q", s)
	}
	return fmt.Sscan(s[i:], v)
}
