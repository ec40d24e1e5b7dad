package diskio

import "os"

// Stamp is what the file system says of a file's identity and version:
// its device and inode, size and modification time. A file whose stamp is
// unchanged has not been rewritten, replaced or resized through the file
// system's ordinary calls, so a digest of its bytes taken under the same
// stamp still holds.
type Stamp struct {
	Dev      uint64 `json:"dev"`
	Inode    uint64 `json:"inode"`
	Size     int64  `json:"size"`
	ModNanos int64  `json:"mtime_ns"`
}

// StampOf returns the stamp of a file's information, as from os.Stat
// (device and inode are 0 on systems that have none).
func StampOf(fi os.FileInfo) Stamp {
	st := Stamp{Size: fi.Size(), ModNanos: fi.ModTime().UnixNano()}
	st.Dev, st.Inode = fileID(fi)
	return st
}
