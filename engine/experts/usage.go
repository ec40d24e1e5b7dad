package experts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/spoolhq/spool/internal/atomicfile"
	"github.com/spoolhq/spool/internal/regularfile"
)

// UsageEngineID identifies GLM-5.2 histories in the .coli_usage format:
// FNV-1a-32 of "glm_moe_dsa".
const UsageEngineID = 3815245270

// usageVersion is the format version written and the newest one read.
const usageVersion = 1

// maxUsageFile bounds the size of a usage history read from disk.
const maxUsageFile = 64 << 20

// Usage counts how often each routed expert was used, across runs. Rows
// are decoder layers 0..layers-1 plus the MTP row (row layers). The
// streamed tier adds one per (layer, expert) per forward that routed it.
//
// On disk it is Colibri's .coli_usage text: one record of three integers
// per line, "-1 <layers> <experts>", then "-2 <version> <engine id>", then
// "<layer> <expert> <count>" for every non-zero count.
type Usage struct {
	layers, experts int
	counts          []uint64 // (layers+1) * experts
}

// UsageRecord is one non-zero count.
type UsageRecord struct {
	Layer, Expert int
	Count         uint64
}

// NewUsage returns an empty history for a model of layers decoder layers
// and experts routed experts per layer.
func NewUsage(layers, experts int) *Usage {
	return &Usage{layers: layers, experts: experts, counts: make([]uint64, (layers+1)*experts)}
}

// LoadUsage reads the history at path; a missing or empty file is an
// empty history. The leftovers of saves that did not finish are swept.
func LoadUsage(path string, layers, experts int) (*Usage, error) {
	// A save that a kill cut short left its temporary file.
	atomicfile.Sweep(path)
	// A regular file of bounded size: a FIFO or a huge file is refused,
	// not waited on or read whole.
	data, err := regularfile.Read(path, maxUsageFile)
	if errors.Is(err, os.ErrNotExist) {
		return NewUsage(layers, experts), nil
	}
	if err != nil {
		return nil, fmt.Errorf("experts: usage history: %w", err)
	}
	u, err := ParseUsage(data, layers, experts)
	if err != nil {
		return nil, fmt.Errorf("experts: usage history %s: %w", path, err)
	}
	return u, nil
}

// ParseUsage parses a history for a model of the given shape. Header
// records must match it (dimensions, version at most 1, GLM-5.2's engine
// id); a file without headers is accepted. Other negative-layer records
// are skipped; repeated records add up; counts saturate.
func ParseUsage(data []byte, layers, experts int) (*Usage, error) {
	if bytes.HasPrefix(data, []byte("IKU1")) {
		return nil, errors.New("binary IKU1 history is not supported")
	}
	u := NewUsage(layers, experts)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 256), 4096)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: %d fields, want 3 integers", line, len(f))
		}
		a, err1 := strconv.ParseInt(f[0], 10, 64)
		b, err2 := strconv.ParseInt(f[1], 10, 64)
		c, err3 := strconv.ParseUint(f[2], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("line %d: %q: want three integers (count not negative)", line, text)
		}
		switch {
		case a == -1:
			if b != int64(layers) || c != uint64(experts) {
				return nil, fmt.Errorf("line %d: history is for %d layers x %d experts, the model has %d x %d", line, b, c, layers, experts)
			}
			continue
		case a == -2:
			if b > usageVersion || b < 1 {
				return nil, fmt.Errorf("line %d: format version %d, this reader takes 1", line, b)
			}
			if c != UsageEngineID {
				return nil, fmt.Errorf("line %d: engine id %d is not GLM-5.2's %d", line, c, uint64(UsageEngineID))
			}
			continue
		case a < 0:
			continue
		}
		if a > int64(layers) || b < 0 || b >= int64(experts) {
			return nil, fmt.Errorf("line %d: layer %d expert %d is outside %d layers (+ MTP row) x %d experts", line, a, b, layers, experts)
		}
		i := int(a)*experts + int(b)
		if u.counts[i] > math.MaxUint64-c {
			u.counts[i] = math.MaxUint64
		} else {
			u.counts[i] += c
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	return u, nil
}

func (u *Usage) add(layer, expert int) {
	if layer < 0 || layer > u.layers || expert < 0 || expert >= u.experts {
		return
	}
	if i := layer*u.experts + expert; u.counts[i] < math.MaxUint64 {
		u.counts[i]++
	}
}

// Count returns the count of one expert (0 outside the shape).
func (u *Usage) Count(layer, expert int) uint64 {
	if layer < 0 || layer > u.layers || expert < 0 || expert >= u.experts {
		return 0
	}
	return u.counts[layer*u.experts+expert]
}

// Total is the sum of all counts (saturating).
func (u *Usage) Total() uint64 {
	var t uint64
	for _, c := range u.counts {
		if t > math.MaxUint64-c {
			return math.MaxUint64
		}
		t += c
	}
	return t
}

// Records lists the non-zero counts in layer, then expert order.
func (u *Usage) Records() []UsageRecord {
	var out []UsageRecord
	for i, c := range u.counts {
		if c > 0 {
			out = append(out, UsageRecord{Layer: i / u.experts, Expert: i % u.experts, Count: c})
		}
	}
	return out
}

// Encode renders the history in the .coli_usage text format; an all-zero
// history is empty.
func (u *Usage) Encode() []byte {
	recs := u.Records()
	if len(recs) == 0 {
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "-1 %d %d\n-2 %d %d\n", u.layers, u.experts, usageVersion, uint64(UsageEngineID))
	for _, r := range recs {
		fmt.Fprintf(&b, "%d %d %d\n", r.Layer, r.Expert, r.Count)
	}
	return b.Bytes()
}

// Save writes the history to path atomically and durably
// (internal/atomicfile).
func (u *Usage) Save(path string) error {
	if err := atomicfile.WriteFile(path, u.Encode(), 0o644); err != nil {
		return fmt.Errorf("experts: saving usage history: %w", err)
	}
	return nil
}

func (u *Usage) clone() *Usage {
	c := *u
	c.counts = append([]uint64(nil), u.counts...)
	return &c
}
