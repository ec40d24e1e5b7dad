package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spoolhq/spool/engine/remote/standin"
)

func main() {
	port := flag.Int("port", 0, "port to listen on (0 picks a free one)")
	key := flag.String("key", "", "require this bearer key on /v1/")
	model := flag.String("model", "", "served model name (default glm-5.2-fp8)")
	delay := flag.Duration("chunk-delay", 0, "pause between streamed chunks")
	flag.Parse()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "vllm-standin:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: standin.New(standin.Options{Model: *model, Key: *key, ChunkDelay: *delay}), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(os.Stderr, "vllm-standin listening on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "vllm-standin:", err)
		os.Exit(1)
	}
}
