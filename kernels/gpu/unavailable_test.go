//go:build !(vulkan && cgo)

package gpu_test

import (
	"errors"
	"testing"

	"github.com/spoolhq/spool/kernels/gpu"
)

// Without the Vulkan backend Open fails with ErrUnavailable, which callers
// turn into a CPU fallback.
func TestOpenUnavailable(t *testing.T) {
	d, err := gpu.Open(gpu.Options{Device: -1})
	if d != nil || !errors.Is(err, gpu.ErrUnavailable) {
		t.Fatalf("Open = %v, %v; want ErrUnavailable", d, err)
	}
}
