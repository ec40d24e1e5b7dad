package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/scheduler"
)

// BenchmarkDecode reports the aggregate greedy decode rate of 1 and 4
// concurrent requests of 128 tokens (end-of-sequence banned), with and
// without MTP speculation for the lone request.
func BenchmarkDecode(b *testing.B) {
	m := openMini(b)
	ps := prompts(b)
	noEOS := map[int]float64{}
	for _, id := range m.Config().EOSTokenIDs {
		noEOS[id] = -100
	}
	for _, c := range []struct {
		streams int
		spec    bool
	}{{1, false}, {1, true}, {4, false}} {
		b.Run(fmt.Sprintf("streams=%d/mtp=%v", c.streams, c.spec), func(b *testing.B) {
			s := scheduler.New(m, scheduler.Config{MaxBatch: 4, IdleSequences: -1})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go s.Run(ctx)
			tokens := 0
			start := time.Now()
			for range b.N {
				var streams []*scheduler.Stream
				for i := range c.streams {
					prompt := slices.Concat(ps[i%len(ps)], []int{40 + i})
					st, err := s.Submit(ctx, scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 128, LogitBias: noEOS, Speculative: c.spec}})
					if err != nil {
						b.Fatal(err)
					}
					streams = append(streams, st)
				}
				for _, st := range streams {
					for {
						toks, res, err := st.Next(ctx)
						if err != nil {
							b.Fatal(err)
						}
						tokens += len(toks)
						if res != nil {
							break
						}
					}
				}
			}
			b.ReportMetric(float64(tokens)/time.Since(start).Seconds(), "tok/s")
		})
	}
}
