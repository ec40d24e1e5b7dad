package server

import (
	"errors"
	"net"
	"sync"
)

// OllamaDefaultPort is the port Ollama's clients assume when given no
// address (127.0.0.1:11434).
const OllamaDefaultPort = 11434

// JoinListeners returns one listener that accepts from every one of lns
// (for example the configured port and Ollama's default one), so that one
// Serve, with its connection limits, answers them all. Addr is the first
// one's; Close closes them all.
func JoinListeners(lns ...net.Listener) net.Listener {
	if len(lns) == 1 {
		return lns[0]
	}
	j := &joined{lns: lns, conns: make(chan acceptResult), done: make(chan struct{})}
	for _, ln := range lns {
		j.wg.Add(1)
		go j.accept(ln)
	}
	return j
}

type acceptResult struct {
	c   net.Conn
	err error
}

type joined struct {
	lns   []net.Listener
	conns chan acceptResult
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// accept forwards ln's connections until ln fails or the join is closed.
func (j *joined) accept(ln net.Listener) {
	defer j.wg.Done()
	for {
		c, err := ln.Accept()
		var ne net.Error
		if err != nil && errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		select {
		case j.conns <- acceptResult{c, err}:
		case <-j.done:
			if c != nil {
				c.Close()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

func (j *joined) Accept() (net.Conn, error) {
	select {
	case r := <-j.conns:
		return r.c, r.err
	case <-j.done:
		return nil, net.ErrClosed
	}
}

func (j *joined) Close() error {
	var err error
	j.once.Do(func() {
		close(j.done)
		for _, ln := range j.lns {
			err = errors.Join(err, ln.Close())
		}
		j.wg.Wait()
	})
	return err
}

func (j *joined) Addr() net.Addr { return j.lns[0].Addr() }
