package main

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestWithOllamaPort: a free Ollama port is joined to the server's
// listener; a taken one is reported and the server listens on its own.
func TestWithOllamaPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := taken.Addr().(*net.TCPAddr).Port
	h := &supervisor{}
	h.cfg.Server.Host = "127.0.0.1"
	h.cfg.OllamaPort = port
	var log bytes.Buffer
	if got := h.withOllamaPort(ln, &log); got != ln || !strings.Contains(log.String(), "not also listening on Ollama's port") {
		t.Errorf("taken port: %v, log %q", got, log.String())
	}
	taken.Close()
	log.Reset()
	joined := h.withOllamaPort(ln, &log)
	if joined == ln || !strings.Contains(log.String(), "also answers at") {
		t.Fatalf("free port: %v, log %q", joined, log.String())
	}
	defer joined.Close()
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := joined.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	h.cfg.OllamaPort = 0
	if got := h.withOllamaPort(ln, &log); got != ln {
		t.Errorf("port 0 joined a listener")
	}
}
