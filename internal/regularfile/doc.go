// Package regularfile reads the small files of a model directory (configs,
// chat templates, tokenizers) safely: a file that is not a regular file (a
// FIFO would block the read forever, a device never ends) or that is larger
// than the caller allows is refused before it is opened.
package regularfile
