package sysinfo

import (
	"bufio"
	"bytes"
	"math/bits"
	"strconv"
)

// FootprintSample is the process memory use at one moment. All figures are
// current values in bytes, never peaks.
type FootprintSample struct {
	// Footprint is the figure to budget against: memory the process holds
	// that the system cannot reclaim by dropping clean file pages. On macOS
	// it is the kernel's phys_footprint (what Activity Monitor shows); on
	// Linux it is Anon + Swap.
	Footprint uint64
	// RSS is the resident set size, including clean file-backed pages of
	// mapped files.
	RSS uint64
	// Anon is resident anonymous memory (Linux Anonymous/RssAnon; macOS
	// internal pages).
	Anon uint64
	// Swap is anonymous memory swapped out (Linux) or compressed (macOS).
	Swap uint64
	// Source names where the figures came from, e.g. "/proc/self/status".
	Source string
}

// parseProcKB parses the "Key: value [kB]" lines of /proc/meminfo,
// /proc/self/status and /proc/self/smaps_rollup. Values with a kB unit are
// returned in bytes, values without a unit as they are. Lines whose key has
// spaces or whose value is not a single number (and optional unit) are
// skipped, as are values that overflow.
func parseProcKB(data []byte) map[string]uint64 {
	out := make(map[string]uint64)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		key, rest, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || len(key) == 0 || bytes.ContainsAny(key, " \t") {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) == 0 || len(fields) > 2 {
			continue
		}
		v, err := strconv.ParseUint(string(fields[0]), 10, 64)
		if err != nil {
			continue
		}
		if len(fields) == 2 {
			if string(fields[1]) != "kB" {
				continue
			}
			hi, lo := bits.Mul64(v, 1024)
			if hi != 0 {
				continue
			}
			v = lo
		}
		out[string(key)] = v
	}
	return out
}
