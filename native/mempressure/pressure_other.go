//go:build !linux && !(darwin && cgo)

package mempressure

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// Start fails here: this system (or a macOS build without cgo) has no
// memory-pressure notifications Spool subscribes to.
func Start(context.Context) (*Monitor, error) {
	return nil, fmt.Errorf("mempressure: no memory-pressure notifications on %s without cgo: %w", runtime.GOOS, errors.ErrUnsupported)
}
