package experts

import "github.com/spoolhq/spool/native/diskio"

// ReadPool is the direct-read pool the tier reads experts through, for
// other readers of the same disk (the prompt cache's restores) to share its
// queue. It closes with the tier: its other users stop first.
func (s *Streamed) ReadPool() *diskio.ReadPool { return s.pool }
