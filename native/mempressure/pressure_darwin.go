//go:build darwin && cgo

package mempressure

/*
#include <dispatch/dispatch.h>
#include <stdlib.h>
#include <unistd.h>

// spool_mp is one dispatch memory-pressure source and the pipe its handler
// writes the level to (a byte: 1 normal, 2 warning, 4 critical, the
// DISPATCH_MEMORYPRESSURE_* flags), so no Go code runs on dispatch's queue.
typedef struct {
	dispatch_source_t src;
	int fd;
} spool_mp;

static void spool_mp_event(void *ctx) {
	spool_mp *mp = ctx;
	unsigned char b = (unsigned char)(dispatch_source_get_data(mp->src) & 0xff);
	(void)write(mp->fd, &b, 1);
}

static spool_mp *spool_mp_start(int fd) {
	dispatch_queue_t q = dispatch_get_global_queue(QOS_CLASS_UTILITY, 0);
	dispatch_source_t src = dispatch_source_create(DISPATCH_SOURCE_TYPE_MEMORYPRESSURE, 0,
		DISPATCH_MEMORYPRESSURE_NORMAL | DISPATCH_MEMORYPRESSURE_WARN | DISPATCH_MEMORYPRESSURE_CRITICAL, q);
	if (src == NULL) {
		return NULL;
	}
	spool_mp *mp = malloc(sizeof *mp);
	if (mp == NULL) {
		dispatch_release(src);
		return NULL;
	}
	mp->src = src;
	mp->fd = fd;
	dispatch_set_context(src, mp);
	dispatch_source_set_event_handler_f(src, spool_mp_event);
	dispatch_resume(src);
	return mp;
}

// spool_mp_stop cancels the source and waits until no handler runs: the
// cancel handler is the last block the source runs.
static void spool_mp_stop(spool_mp *mp) {
	dispatch_semaphore_t done = dispatch_semaphore_create(0);
	dispatch_source_set_cancel_handler(mp->src, ^{ dispatch_semaphore_signal(done); });
	dispatch_source_cancel(mp->src);
	dispatch_semaphore_wait(done, DISPATCH_TIME_FOREVER);
	dispatch_release(done);
	dispatch_release(mp->src);
	free(mp);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// The DISPATCH_MEMORYPRESSURE_* flags (dispatch/source.h).
const (
	dispatchNormal   = 0x01
	dispatchWarn     = 0x02
	dispatchCritical = 0x04
)

// Start subscribes to the system's memory pressure through a dispatch
// memory-pressure source (DISPATCH_SOURCE_TYPE_MEMORYPRESSURE): macOS says
// when the level changes, Normal included.
func Start(ctx context.Context) (*Monitor, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("mempressure: pipe: %w", err)
	}
	mp := C.spool_mp_start(C.int(w.Fd()))
	if mp == nil {
		r.Close()
		w.Close()
		return nil, errors.New("mempressure: dispatch_source_create(DISPATCH_SOURCE_TYPE_MEMORYPRESSURE) failed")
	}
	m := &Monitor{levels: make(chan Level, 1), source: "dispatch memory-pressure source", done: make(chan struct{})}
	m.stop = func() {
		C.spool_mp_stop(mp) // no handler writes after this
		w.Close()           // the reader sees EOF
	}
	stopOnCancel := context.AfterFunc(ctx, func() { m.once.Do(m.stop) })
	go func() {
		defer func() {
			stopOnCancel()
			r.Close()
			close(m.levels)
			close(m.done)
		}()
		var b [1]byte
		for {
			if _, err := r.Read(b[:]); err != nil {
				return // EOF: stopped
			}
			switch {
			case b[0]&dispatchCritical != 0:
				m.send(Critical)
			case b[0]&dispatchWarn != 0:
				m.send(Warning)
			case b[0]&dispatchNormal != 0:
				m.send(Normal)
			}
		}
	}()
	return m, nil
}
