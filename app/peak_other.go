//go:build !unix

package main

import "errors"

// peakRSS is not available on this system.
func peakRSS() (int64, error) {
	return 0, errors.New("peak resident size is not available on this system")
}
