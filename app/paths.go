package main

import (
	"os"
	"path/filepath"
)

// usagePath is where the routed-expert usage history of the model in dir
// is kept: Spool/usage/<model>.coli_usage in the user's cache directory
// ("" when there is none).
func usagePath(dir string) string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "Spool", "usage", filepath.Base(filepath.Clean(dir))+".coli_usage")
}

// fingerprintStore is where the digests of models' weight files are
// remembered (engine/fingerprint): Spool/fingerprints.json in the user's
// cache directory ("" when there is none: they are computed each time).
func fingerprintStore() string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "Spool", "fingerprints.json")
}
