//go:build cgo

package bench

const cgoEnabled = true
