//go:build !cgo || !(amd64 || arm64)

package kernels

// RANSFeatures names the rANS decode loop this machine runs.
func RANSFeatures() string { return "generic (pure Go)" }

func ransDecode(out []byte, src []byte, state *[RANSLanes]uint16, table *RANSTable) (int, int) {
	return goRANSDecode(out, src, state, table)
}
