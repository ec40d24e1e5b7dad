package experts

// Replaying recorded routing traces, for the tests: reading a trace
// (ParseRouteTrace), driving a source with it (Replay) and running cache
// policies on it alone (ReplayPolicy, policyreplay_export_test.go).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// maxTraceLine bounds one line of a trace file.
const maxTraceLine = 1 << 16

// ParseRouteTrace reads a trace in either text form (see RouteTrace). A
// Colibri trace carries no shape: Layers and Experts are then one more
// than the largest layer and id seen.
func ParseRouteTrace(r io.Reader) (*RouteTrace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxTraceLine)
	t := &RouteTrace{}
	line := 0
	header := false
	type callKey struct{ call, layer int }
	var last callKey
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if line == 1 && f[0] == "spool-route-trace" {
			if len(f) != 4 || f[1] != "1" {
				return nil, fmt.Errorf("experts: route trace line 1: want \"spool-route-trace 1 <layers> <experts>\"")
			}
			var err1, err2 error
			t.Layers, err1 = strconv.Atoi(f[2])
			t.Experts, err2 = strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || t.Layers < 1 || t.Experts < 1 || t.Layers > 4096 || t.Experts > 1<<16 {
				return nil, fmt.Errorf("experts: route trace line 1: bad shape %q %q", f[2], f[3])
			}
			header = true
			continue
		}
		if header {
			s, err := parseSpoolStep(f, t.Layers, t.Experts)
			if err != nil {
				return nil, fmt.Errorf("experts: route trace line %d: %w", line, err)
			}
			t.Steps = append(t.Steps, s)
			continue
		}
		call, layer, ids, err := parseColibriStep(f)
		if err != nil {
			return nil, fmt.Errorf("experts: route trace line %d: %w", line, err)
		}
		k := callKey{call, layer}
		if n := len(t.Steps); n > 0 && k == last {
			s := &t.Steps[n-1]
			for _, id := range ids {
				if _, found := slices.BinarySearch(s.IDs, id); !found {
					s.IDs = append(s.IDs, id)
					slices.Sort(s.IDs)
				}
			}
		} else {
			s := RouteStep{Layer: layer}
			for _, id := range ids {
				if !slices.Contains(s.IDs, id) {
					s.IDs = append(s.IDs, id)
				}
			}
			slices.Sort(s.IDs)
			t.Steps = append(t.Steps, s)
		}
		last = k
		t.Layers = max(t.Layers, layer+1)
		for _, id := range ids {
			t.Experts = max(t.Experts, id+1)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("experts: route trace line %d: %w", line+1, err)
	}
	return t, nil
}

func parseSpoolStep(f []string, layers, experts int) (RouteStep, error) {
	layer, err := strconv.Atoi(f[0])
	if err != nil || layer < 0 || layer > layers {
		return RouteStep{}, fmt.Errorf("layer %q is not in 0..%d", f[0], layers)
	}
	s := RouteStep{Layer: layer, IDs: make([]int, 0, len(f)-1)}
	for _, v := range f[1:] {
		id, err := strconv.Atoi(v)
		if err != nil || id < 0 || id >= experts {
			return RouteStep{}, fmt.Errorf("expert %q is not in 0..%d", v, experts-1)
		}
		if slices.Contains(s.IDs, id) {
			return RouteStep{}, fmt.Errorf("expert %d listed twice", id)
		}
		s.IDs = append(s.IDs, id)
	}
	slices.Sort(s.IDs)
	return s, nil
}

// parseColibriStep reads "<call> <row> <layer> <id>:<gate> ...".
func parseColibriStep(f []string) (call, layer int, ids []int, err error) {
	if len(f) < 4 {
		return 0, 0, nil, fmt.Errorf("want \"<call> <row> <layer> <id>:<gate> ...\" or a spool-route-trace header")
	}
	call, err1 := strconv.Atoi(f[0])
	_, err2 := strconv.Atoi(f[1])
	layer, err3 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || err3 != nil || call < 0 || layer < 0 || layer > 4096 {
		return 0, 0, nil, fmt.Errorf("bad call, row or layer in %q", strings.Join(f[:3], " "))
	}
	for _, v := range f[3:] {
		idText, _, _ := strings.Cut(v, ":")
		id, err := strconv.Atoi(idText)
		if err != nil || id < 0 || id >= 1<<16 {
			return 0, 0, nil, fmt.Errorf("bad expert %q", v)
		}
		ids = append(ids, id)
	}
	return call, layer, ids, nil
}

// Replay drives s with the acquisitions of t, in order: each step is
// acquired, every expert taken and marked done, and the lease released,
// as a forward would; the caches and counters evolve as in the run that
// recorded t (Stats tells the hits and reads).
func (s *Streamed) Replay(ctx context.Context, t *RouteTrace) error {
	for i, st := range t.Steps {
		l, err := s.Acquire(ctx, st.Layer, st.IDs)
		if err != nil {
			return fmt.Errorf("experts: replay step %d: %w", i, err)
		}
		for {
			idx, _, err := l.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				l.Release()
				return fmt.Errorf("experts: replay step %d: %w", i, err)
			}
			l.Done(idx)
		}
		l.Release()
	}
	return nil
}
