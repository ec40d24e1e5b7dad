package plan

import (
	"fmt"
	"math"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/spoolhq/spool/internal/bytesize"
)

// ParseSize parses a positive byte count such as "32GiB", "24GB",
// "512MiB", "1.5 GiB" or "4096". Binary suffixes (KiB, MiB, GiB, TiB, or
// Ki, Mi, Gi, Ti) are powers of 1024; decimal ones (kB, MB, GB, TB, or k,
// M, G, T) are powers of 1000; case does not matter.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("size %q is empty", s)
	}
	n, err := humanize.ParseBytes(t)
	if err != nil {
		return 0, fmt.Errorf("size %q: want a number with an optional unit such as 32GiB, 24GB or 512MiB", s)
	}
	if n == 0 {
		return 0, fmt.Errorf("size %q must be positive", s)
	}
	if n > math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(n), nil
}

// SizeText formats a byte count as the plan's table does ("10.13 GiB"):
// bytesize.IEC.
func SizeText(n int64) string { return bytesize.IEC(n) }

// Table renders the plan as a human-readable table: every line item with
// its size, exact bytes and explanation, the total against the limit, and
// the verdict.
func (p *Plan) Table() string {
	type line struct{ name, size, bytes, detail string }
	var lines []line
	add := func(name string, n int64, detail string) {
		lines = append(lines, line{name, bytesize.IEC(n), humanize.Comma(n), detail})
	}
	for _, it := range p.Items {
		add(it.Name, it.Bytes, it.Detail)
	}
	add("planned process", p.PlannedProcessBytes, "sum of the items above")
	add("limit", p.MemoryLimitBytes, "memory minus the OS reserve")
	add("OS reserve", p.OSReserveBytes, "left to the operating system and other apps")
	add("memory", p.MemoryBytes, "the budget planned against")
	var wn, ws, wb int
	for _, l := range lines {
		wn, ws, wb = max(wn, len(l.name)), max(ws, len(l.size)), max(wb, len(l.bytes))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "memory plan: %d token context x %d sequence(s), %s\n", p.Context, p.Sequences, p.Source)
	for i, l := range lines {
		if i == len(p.Items) {
			fmt.Fprintf(&b, "  %s\n", strings.Repeat("-", wn+ws+wb+4))
		}
		fmt.Fprintf(&b, "  %-*s  %*s  %*s  %s\n", wn, l.name, ws, l.size, wb, l.bytes, l.detail)
	}
	if p.Fits {
		fmt.Fprintf(&b, "fits: yes, %d expert cache slots per layer, %s free under the limit\n", p.CacheSlotsPerLayer, bytesize.IEC(p.MemoryLimitBytes-p.PlannedProcessBytes))
	} else {
		fmt.Fprintf(&b, "fits: no: %s\n", p.Problem)
	}
	return b.String()
}
