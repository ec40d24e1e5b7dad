package bytesize

import (
	"math"
	"strconv"
)

var (
	binaryUnits  = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	decimalUnits = []string{"kB", "MB", "GB", "TB", "PB", "EB"}
)

// IEC writes n in binary units (1 GiB = 2^30 bytes) with two decimals:
// "10.13 GiB", "18.06 MiB"; under 1 KiB in bytes: "512 B".
func IEC(n int64) string { return format(n, 1024, 2, binaryUnits) }

// SI writes n in decimal units (1 GB = 10^9 bytes, as macOS shows file and
// disk sizes) with one decimal: "383.8 GB"; under 1 kB in bytes: "999 B".
func SI(n int64) string { return format(n, 1000, 1, decimalUnits) }

func format(n int64, base float64, decimals int, units []string) string {
	v := float64(n)
	if math.Abs(v) < base {
		return strconv.FormatInt(n, 10) + " B"
	}
	u := -1
	for u+1 < len(units) && math.Abs(v) >= base {
		v /= base
		u++
	}
	return strconv.FormatFloat(v, 'f', decimals, 64) + " " + units[u]
}
