package main

import (
	"os"
	"path/filepath"
)

// usageDir is where routed-expert usage histories are kept:
// Spool/usage in the user's cache directory ("" when there is none).
func usageDir() string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "Spool", "usage")
}
