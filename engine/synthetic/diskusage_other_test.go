//go:build !unix

package synthetic

import "testing"

// diskUsage is not available on this system.
func diskUsage(t *testing.T, dir string) (int64, bool) { return 0, false }
