// Package layering holds the import rules of the module as a test: which
// packages may import which (a protocol or the remote front never imports
// the server, the turn stays free of any engine, the local engine serves
// no HTTP, ...), and where models are loaded (loader.Open only in the
// composition root, engine/host). The test reads the module's sources and
// fails naming the path of every broken rule.
package layering
