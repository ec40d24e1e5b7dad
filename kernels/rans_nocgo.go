//go:build !cgo || !(amd64 || arm64)

package kernels

// ransLoops is RANSLoops: the Go reference alone. It is set once and only
// read.
var ransLoops = []RANSLoop{goRANSLoop}
