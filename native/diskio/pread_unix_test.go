//go:build unix

package diskio

import (
	"bytes"
	"os"
	"testing"
)

// TestPreadFileReadsConcurrently: a positioned read does not wait for
// another user of the descriptor. The test holds the descriptor's read
// lock (as a reader through RawConn.Read would) and reads while it is
// held; a preadFile that took that lock too would wait for the release,
// which comes only after it returns (so such a preadFile hangs the test
// until go test's timeout names it). Ordering through channels, no clock.
func TestPreadFileReadsConcurrently(t *testing.T) {
	path, data := writeTestFile(t, t.TempDir(), testFileSize)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	holding, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- rc.Read(func(uintptr) bool {
			close(holding)
			<-release
			return true
		})
	}()
	<-holding
	got := make([]byte, 4096)
	n, err := preadFile(f, got, 100)
	close(release)
	if err != nil || n != len(got) || !bytes.Equal(got, data[100:100+len(got)]) {
		t.Fatalf("preadFile while another reader held the descriptor: %d bytes, err %v (or wrong bytes)", n, err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}
