package retryafter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Parse reads a Retry-After value at now: a number of seconds, or an HTTP
// date (any of the three forms http.ParseTime reads). It returns at most
// limit, and 0 for an absent, malformed, negative or past value.
func Parse(v string, now time.Time, limit time.Duration) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs >= int64(limit/time.Second) {
			return limit
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), limit)
	}
	return 0
}

// Seconds is Parse in whole seconds, rounded up (a date half a second
// away is a wait of one second, not none), for re-sending in a header.
func Seconds(v string, now time.Time, limit time.Duration) int {
	d := Parse(v, now, limit)
	return int((d + time.Second - 1) / time.Second)
}
