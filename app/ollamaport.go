package main

import (
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/spoolhq/spool/engine/server"
)

// withOllamaPort joins to ln a listener on the configured Ollama port (the
// same host), so that clients hard-coding Ollama's address reach the same
// server; when that port is taken (Ollama itself running, say) it says so
// on log and serves ln alone.
func (h *supervisor) withOllamaPort(ln net.Listener, log io.Writer) net.Listener {
	h.mu.Lock()
	host, port := h.cfg.Server.Host, h.cfg.OllamaPort
	h.mu.Unlock()
	if port <= 0 {
		return ln
	}
	extra, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		fmt.Fprintf(log, "spool: not also listening on Ollama's port %d: %v\n", port, err)
		return ln
	}
	fmt.Fprintf(log, "spool: Ollama's API also answers at http://%s\n", extra.Addr())
	return server.JoinListeners(ln, extra)
}
