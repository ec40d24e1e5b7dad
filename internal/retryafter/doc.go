// Package retryafter owns the reading of an HTTP Retry-After value (RFC
// 9110 §10.2.3): delay-seconds or an HTTP date. The Hub downloader and the
// remote engine's client both read it here, so that a server which answers
// with a date is honoured the same way everywhere.
package retryafter
