//go:build linux

package mempressure

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Start subscribes to memory pressure through PSI triggers on the
// memory.pressure file of this process's cgroup v2 (which a container's
// memory limit drives), else, when there is none or it may not be
// written (a cgroup owned by root), on /proc/pressure/memory (the whole
// machine). It fails, wrapping errors.ErrUnsupported, when the kernel has
// no PSI (built without it, or booted with psi=0).
func Start(ctx context.Context) (*Monitor, error) {
	return startFirst(ctx, psiPaths())
}

// startFirst watches the first of paths whose triggers register.
func startFirst(ctx context.Context, paths []string) (*Monitor, error) {
	var errs []error
	for _, path := range paths {
		m, err := startPSI(ctx, path, WarnStall, CritStall)
		if err == nil {
			return m, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// psiPaths lists the memory.pressure file of the process's cgroup v2 when
// there is one, then /proc/pressure/memory.
func psiPaths() []string {
	const system = "/proc/pressure/memory"
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return []string{system}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rel, ok := strings.CutPrefix(sc.Text(), "0::")
		if !ok {
			continue
		}
		// Pure cgroup v2 mounts at /sys/fs/cgroup; hybrid systems put the
		// unified hierarchy under it.
		for _, mount := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			p := filepath.Join(mount, rel, "memory.pressure")
			if _, err := os.Stat(p); err == nil {
				return []string{p, system}
			}
		}
	}
	return []string{system}
}

// startPSI registers a Warning and a Critical trigger (stalls of
// warnStall and critStall within a Window) on path and watches them.
func startPSI(ctx context.Context, path string, warnStall, critStall time.Duration) (*Monitor, error) {
	warn, err := openTrigger(path, "some", warnStall)
	if err != nil {
		return nil, err
	}
	crit, err := openTrigger(path, "full", critStall)
	if err != nil {
		unix.Close(warn)
		return nil, err
	}
	var wake [2]int
	if err := unix.Pipe2(wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(warn)
		unix.Close(crit)
		return nil, fmt.Errorf("mempressure: pipe: %w", err)
	}
	m := &Monitor{levels: make(chan Level, 1), source: path, done: make(chan struct{})}
	m.stop = func() { unix.Write(wake[1], []byte{0}) }
	stopOnCancel := context.AfterFunc(ctx, func() { m.once.Do(m.stop) })
	go func() {
		defer func() {
			stopOnCancel()
			for _, fd := range []int{warn, crit, wake[0], wake[1]} {
				unix.Close(fd)
			}
			close(m.levels)
			close(m.done)
		}()
		m.err = m.watchPSI(path, warn, crit, wake[0])
	}()
	return m, nil
}

// openTrigger opens path and registers a trigger: kind ("some" or "full")
// stall of at least stall within each Window.
func openTrigger(path, kind string, stall time.Duration) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return -1, fmt.Errorf("mempressure: %s: %w (the kernel has no PSI; boot with psi=1): %w", path, errors.ErrUnsupported, err)
		}
		return -1, fmt.Errorf("mempressure: open %s: %w", path, err)
	}
	trig := fmt.Sprintf("%s %d %d\x00", kind, stall.Microseconds(), Window.Microseconds())
	if _, err := unix.Write(fd, []byte(trig)); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EOPNOTSUPP) {
			return -1, fmt.Errorf("mempressure: %s: %w (PSI is disabled; boot with psi=1): %w", path, errors.ErrUnsupported, err)
		}
		return -1, fmt.Errorf("mempressure: registering the trigger %q on %s: %w", strings.TrimRight(trig, "\x00"), path, err)
	}
	return fd, nil
}

// watchPSI polls the triggers until wake is written to, sending level
// changes; while the level is raised it wakes every Window to let it step
// back after Calm.
func (m *Monitor) watchPSI(path string, warn, crit, wake int) error {
	h := hysteresis{calm: Calm}
	fds := []unix.PollFd{
		{Fd: int32(warn), Events: unix.POLLPRI},
		{Fd: int32(crit), Events: unix.POLLPRI},
		{Fd: int32(wake), Events: unix.POLLIN},
	}
	for {
		timeout := -1
		if h.cur != Normal {
			timeout = int(Window.Milliseconds())
		}
		for i := range fds {
			fds[i].Revents = 0
		}
		n, err := unix.Poll(fds, timeout)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("mempressure: poll %s: %w", path, err)
		}
		if fds[2].Revents != 0 {
			return nil
		}
		now := time.Now()
		for i, l := range []Level{Warning, Critical} {
			re := fds[i].Revents
			if re&(unix.POLLERR|unix.POLLNVAL) != 0 {
				return fmt.Errorf("mempressure: %s: the %s trigger is gone (its cgroup was removed?)", path, l)
			}
			if re&unix.POLLPRI != 0 {
				if lv, changed := h.event(l, now); changed {
					m.send(lv)
				}
			}
		}
		if n == 0 {
			if lv, changed := h.tick(now); changed {
				m.send(lv)
			}
		}
	}
}
