package promptcache

// Stats are a cache's counters (since New) and current sizes, as the
// server's /stats shows them.
type Stats struct {
	BlockTokens int `json:"block_tokens"`
	// Lookups counts Lookup calls; Hits the Restore calls that restored at
	// least one token, HitTokens those tokens.
	Lookups   int64 `json:"lookups"`
	Hits      int64 `json:"hits"`
	HitTokens int64 `json:"hit_tokens"`
	// StoredTokens counts the tokens of blocks Store added.
	StoredTokens int64 `json:"stored_tokens"`

	Memory TierStats `json:"memory"`
	Disk   TierStats `json:"disk"`

	// DiskDir is the disk tier's directory; DiskOff, when set, says why
	// there is no disk tier although one was asked for.
	DiskDir string `json:"disk_dir,omitempty"`
	DiskOff string `json:"disk_off,omitempty"`
	// Invalid counts block files that did not match (damaged, truncated,
	// another model's or another format's) and were deleted.
	Invalid int64 `json:"invalid_files"`
	// WriteErrors counts block writes that failed (the block is lost to the
	// disk tier, nothing else); DiskFull those that found the disk full.
	WriteErrors int64 `json:"write_errors"`
	DiskFull    int64 `json:"disk_full"`
	// Dropped counts blocks evicted from memory that were not written to
	// disk (no disk tier, disk full or failing, or the caller gave up
	// waiting).
	Dropped int64 `json:"dropped"`
}

// TierStats describe one tier.
type TierStats struct {
	// Blocks and Bytes are what the tier holds now (the memory tier
	// includes the evicted blocks waiting to be written; the disk tier
	// counts file sizes rounded to 4 KiB, other models' files included);
	// CapBytes is its cap.
	Blocks   int   `json:"blocks"`
	Bytes    int64 `json:"bytes"`
	CapBytes int64 `json:"cap_bytes"`
	// OtherBytes is the part of Bytes that other models' blocks occupy.
	OtherBytes int64 `json:"other_bytes,omitempty"`
	// HitTokens counts tokens restored from the tier.
	HitTokens int64 `json:"hit_tokens"`
	// ReadBytes counts bytes restored from the tier (disk: the bytes the
	// direct reads requested, aligned spans included); WrittenBytes the
	// bytes put into it.
	ReadBytes    int64 `json:"read_bytes"`
	WrittenBytes int64 `json:"written_bytes"`
	// Evictions counts blocks the tier let go to stay within its cap.
	Evictions int64 `json:"evictions"`
}
