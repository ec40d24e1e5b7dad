package experts_test

import (
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
)

func TestUsageEngineID(t *testing.T) {
	h := fnv.New32a()
	h.Write([]byte("glm_moe_dsa"))
	if got := h.Sum32(); got != experts.UsageEngineID {
		t.Fatalf("FNV-1a-32(glm_moe_dsa) = %d, constant %d", got, uint32(experts.UsageEngineID))
	}
}

func TestParseUsage(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []experts.UsageRecord // nil with wantErr
		err  string
	}{
		{"empty", "", nil, ""},
		{"headers", "-1 4 16\n-2 1 3815245270\n1 2 5\n4 15 1\n", []experts.UsageRecord{{Layer: 1, Expert: 2, Count: 5}, {Layer: 4, Expert: 15, Count: 1}}, ""},
		{"legacy headerless, repeats add", "1 2 5\n\n1 2 3\n", []experts.UsageRecord{{Layer: 1, Expert: 2, Count: 8}}, ""},
		{"unknown header skipped", "-7 1 2\n2 3 4\n", []experts.UsageRecord{{Layer: 2, Expert: 3, Count: 4}}, ""},
		{"dims", "-1 78 256\n", nil, "78 layers x 256 experts"},
		{"version", "-2 2 3815245270\n", nil, "format version 2"},
		{"engine", "-2 1 12\n", nil, "engine id 12"},
		{"fields", "1 2\n", nil, "2 fields"},
		{"not a number", "1 x 2\n", nil, "three integers"},
		{"negative count", "1 2 -3\n", nil, "three integers"},
		{"expert range", "1 16 1\n", nil, "outside"},
		{"layer range", "5 1 1\n", nil, "outside"},
		{"binary", "IKU1\x00\x01", nil, "IKU1"},
		{"saturates", "1 1 18446744073709551615\n1 1 9\n", []experts.UsageRecord{{Layer: 1, Expert: 1, Count: 18446744073709551615}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := experts.ParseUsage([]byte(tc.in), 4, 16)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := u.Records(); !slices.Equal(got, tc.want) {
				t.Fatalf("records %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUsageSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".coli_usage")
	u, err := experts.LoadUsage(path, 4, 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Save(path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 0 {
		t.Fatalf("empty history: %v, %v; want a zero-byte file", st, err)
	}
	u, err = experts.ParseUsage([]byte("1 3 7\n4 0 2\n"), 4, 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Save(path); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if want := "-1 4 16\n-2 1 3815245270\n1 3 7\n4 0 2\n"; string(raw) != want {
		t.Fatalf("saved %q, want %q", raw, want)
	}
	back, err := experts.LoadUsage(path, 4, 16)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Records(), u.Records()) || back.Total() != 9 {
		t.Fatalf("reloaded %v", back.Records())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d files after saving, want only the history", len(entries))
	}
	if _, err := experts.LoadUsage(path, 5, 16); err == nil {
		t.Fatal("history for another shape accepted")
	}
}

func FuzzParseUsage(f *testing.F) {
	f.Add([]byte("-1 4 16\n-2 1 3815245270\n1 2 5\n"))
	f.Add([]byte("1 2 3\n\n"))
	f.Add([]byte("IKU1"))
	f.Add([]byte("-2 9 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := experts.ParseUsage(data, 4, 16)
		if err != nil {
			return
		}
		// What parses re-encodes to the same records.
		back, err := experts.ParseUsage(u.Encode(), 4, 16)
		if err != nil {
			t.Fatalf("re-encoded history does not parse: %v", err)
		}
		if !slices.Equal(back.Records(), u.Records()) {
			t.Fatalf("round trip changed the records")
		}
	})
}
