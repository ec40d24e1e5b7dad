package hub

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/download/fakehub"
)

func TestManifestFromFakeHub(t *testing.T) {
	repo := fakehub.SampleRepo("acme/m", 3, 1000, 2000)
	tests := []struct {
		name     string
		omitSibs bool
		pageSize int
	}{
		{"revision API", false, 0},
		{"tree fallback, one page", true, 0},
		{"tree fallback, pages of 2", true, 2},
		{"tree fallback, pages of 1", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakehub.New(repo)
			h.OmitSiblings(tt.omitSibs)
			h.SetTreePageSize(tt.pageSize)
			srv := httptest.NewServer(h)
			defer srv.Close()
			m, err := (&Client{Endpoint: srv.URL}).Manifest(context.Background(), repo.ID, "main")
			if err != nil {
				t.Fatal(err)
			}
			if m.Commit != repo.Commit || m.Repo != repo.ID || m.Revision != "main" || m.Size() != repo.Size() {
				t.Fatalf("manifest %+v", m)
			}
			var got, want []string
			for _, f := range m.Files {
				got = append(got, f.Path+"@"+f.Etag())
			}
			for _, f := range repo.Files {
				want = append(want, f.Path+"@"+f.Etag())
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("files\n%v\nwant\n%v", got, want)
			}
		})
	}
}
