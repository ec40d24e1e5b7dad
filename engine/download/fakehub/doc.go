// Package fakehub is a local stand-in for the Hugging Face Hub that speaks
// the protocol shapes package hub uses: the revision API (?blobs=true), the
// paginated tree API, resolve URLs with redirects for LFS files, ranged
// answers, X-Error-Code errors for gated, private and missing repositories,
// revisions and files. Tests inject faults per request (status storms,
// dropped connections, corrupt or wrongly sized bodies, stalls, slow links)
// and read back every range that was asked for and every byte served.
//
// It is test support: it keeps everything in memory and must not be used to
// serve real models.
package fakehub
