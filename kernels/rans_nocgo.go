//go:build !cgo || !(amd64 || arm64)

package kernels

// RANSFeatures names the rANS decode loop this machine runs.
func RANSFeatures() string { return "generic (pure Go)" }

func ransDecodeSteps(out []byte, src []byte, state *[RANSLanes]uint32, table *RANSTable) (int, int) {
	return goRANSDecodeSteps(out, src, state, table)
}
