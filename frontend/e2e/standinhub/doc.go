// Command standinhub is the e2e suite's local stand-in for the Hugging Face
// Hub: it serves the pinned GLM-5.2 repository at its pinned revision
// (engine/download.DefaultRepo and DefaultRevision) through
// engine/download/fakehub, with the files of a model directory (the demo
// model) as its content, paced so that a download takes a few seconds.
//
// POST /_standin/mode?listing=real makes the revision API list the real
// artifact instead (150 files, 383,760,077,466 bytes: more than a test
// machine's disk holds; &pad=BYTES adds a file of that size for one that
// holds more); listing=content goes back to the served files.
//
// Usage: standinhub -model DIR [-rate BYTES_PER_SECOND]
// It prints "listening http://127.0.0.1:PORT" once it serves.
package main
