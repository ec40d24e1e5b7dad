//go:build !cgo || !(amd64 || arm64)

package kernels

// ransLoops is RANSLoops: the Go reference alone. It is set once and only
// read.
var ransLoops = limitRANSLoops([]RANSLoop{goRANSLoop}, "")

// ransEncode is RANSEncode's implementation: the Go reference.
var ransEncode = goRANSEncode
