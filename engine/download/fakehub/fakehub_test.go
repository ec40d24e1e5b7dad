package fakehub

import (
	"testing"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		in                string
		start, end        int64
		ranged, wantError bool
	}{
		{"", 0, 100, false, false},
		{"bytes=0-9", 0, 10, true, false},
		{"bytes=90-", 90, 100, true, false},
		{"bytes=90-200", 90, 100, true, false},
		{"bytes=-10", 90, 100, true, false},
		{"bytes=100-", 0, 0, false, true},
		{"bytes=5-4", 0, 0, false, true},
		{"bytes=0-1,3-4", 0, 0, false, true},
		{"items=0-1", 0, 0, false, true},
	}
	for _, tt := range tests {
		s, e, ranged, err := parseRange(tt.in, 100)
		if (err != nil) != tt.wantError || (err == nil && (s != tt.start || e != tt.end || ranged != tt.ranged)) {
			t.Errorf("parseRange(%q) = %d, %d, %v, %v", tt.in, s, e, ranged, err)
		}
	}
}

func FuzzParseRange(f *testing.F) {
	f.Add("bytes=0-9", int64(100))
	f.Add("bytes=-5", int64(3))
	f.Fuzz(func(t *testing.T, v string, size int64) {
		if size < 0 {
			return
		}
		s, e, _, err := parseRange(v, size)
		if err == nil && (s < 0 || e > size || s > e) {
			t.Fatalf("parseRange(%q, %d) = [%d, %d)", v, size, s, e)
		}
	})
}

func TestSampleRepo(t *testing.T) {
	r := SampleRepo("o/m", 1, 10, 20)
	again := SampleRepo("o/m", 1, 10, 20)
	if r.Commit != again.Commit || r.Size() != again.Size() || r.Files[5].SHA256() != again.Files[5].SHA256() {
		t.Error("SampleRepo is not deterministic")
	}
	if r.Files[2].Etag() != r.Files[3].Etag() {
		t.Error("the two LICENSE files should share a blob")
	}
	if got := (File{Data: []byte("hello\n")}).BlobID(); got != "ce013625030ba8dba906f756967f9e9ca394464a" {
		t.Errorf("git blob id of hello = %s", got)
	}
}
