package container

import (
	"encoding/binary"
	"unsafe"
)

// hostLittleEndian is true on every platform Spool targets (amd64, arm64).
func hostLittleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

// floatView returns b's values as float32. For F32 bytes that are 4-byte
// aligned on a little-endian host the result aliases b (no copy); otherwise
// the values are decoded into a new slice.
func floatView(dtype string, b []byte) []float32 {
	if dtype == "F32" && hostLittleEndian() && len(b) >= 4 && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
	}
	return decodeFloats(dtype, b)
}
