package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/loader"
)

// UsageFile is the usage history of the model opened in d, in dir ("" for
// none): named after the model's directory for people, and keyed by its
// identity (its weights' fingerprint), so that two models of one name (a
// second gen-bench into the same --out, a fine-tune in a folder of the
// same name) never read each other's history.
func UsageFile(ctx context.Context, d *loader.Dir, dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	fp, err := d.Fingerprint(ctx, fingerprint.Options{Store: FingerprintStore()})
	if err != nil {
		return "", err
	}
	name := filepath.Base(filepath.Clean(d.Path))
	path := filepath.Join(dir, name+"-"+fp.String()[:16]+".coli_usage")
	// A history an older Spool kept under the name alone is adopted once:
	// read, it either fits this model or is set aside (engine/experts).
	legacy := filepath.Join(dir, name+".coli_usage")
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		if fi, err := os.Lstat(legacy); err == nil && fi.Mode().IsRegular() {
			os.Rename(legacy, path)
		}
	}
	return path, nil
}

// FingerprintStore is where the digests of models' weight files are
// remembered (engine/fingerprint): Spool/fingerprints.json in the user's
// cache directory ("" when there is none: they are computed each time).
func FingerprintStore() string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "Spool", "fingerprints.json")
}
