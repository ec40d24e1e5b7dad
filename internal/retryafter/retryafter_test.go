package retryafter_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/spoolhq/spool/internal/retryafter"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {" 7 ", 7 * time.Second}, {"-3", 0}, {"99999", time.Hour},
		{"99999999999999999999", 0}, // not an int64: and not a date either
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{now.Add(30 * time.Second).Format(time.RFC850), 30 * time.Second},
		{now.Add(30 * time.Second).Format(time.ANSIC), 30 * time.Second},
		{now.Add(2 * time.Hour).Format(http.TimeFormat), time.Hour},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"soon", 0}, {"1.5", 0},
	} {
		if got := retryafter.Parse(tc.in, now, time.Hour); got != tc.want {
			t.Errorf("Parse(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestSecondsRoundsUp(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 500_000_000, time.UTC)
	date := time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC).Format(http.TimeFormat) // 2.5 s away
	if got := retryafter.Seconds(date, now, time.Hour); got != 3 {
		t.Errorf("Seconds(%q) = %d, want 3", date, got)
	}
	if got := retryafter.Seconds("12", now, time.Hour); got != 12 {
		t.Errorf("Seconds(12) = %d", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "5", "-1", "Wed, 21 Oct 2015 07:28:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "x"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d := retryafter.Parse(v, now, time.Hour); d < 0 || d > time.Hour {
			t.Fatalf("Parse(%q) = %s, outside 0..1h", v, d)
		}
	})
}
