package server

import (
	"errors"
	"io"
	"net"
	"testing"
)

// TestJoinListeners: connections to either listener are accepted by the
// join; closing it closes both and Accept then fails with net.ErrClosed.
func TestJoinListeners(t *testing.T) {
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	j := JoinListeners(a, b)
	if j.Addr() != a.Addr() {
		t.Errorf("Addr %v, want %v", j.Addr(), a.Addr())
	}
	for _, ln := range []net.Listener{a, b, a} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := j.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if s.LocalAddr().String() != ln.Addr().String() {
			t.Errorf("accepted on %v, dialled %v", s.LocalAddr(), ln.Addr())
		}
		c.Write([]byte("x"))
		buf := make([]byte, 1)
		if _, err := io.ReadFull(s, buf); err != nil || buf[0] != 'x' {
			t.Errorf("read %q %v", buf, err)
		}
		c.Close()
		s.Close()
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
	if _, err := net.Dial("tcp", b.Addr().String()); err == nil {
		t.Errorf("the second listener is still open")
	}
}
