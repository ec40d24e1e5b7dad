// Package bytesize owns how Spool writes a byte count for people: binary
// units with two decimals where memory is concerned (the memory plan, the
// GPU, inspect: "10.13 GiB"), decimal units with one decimal where files
// and disks are (the download, as macOS's Finder counts: "383.8 GB").
// Both come from one formatter.
package bytesize
