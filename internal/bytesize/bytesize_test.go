package bytesize_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/spoolhq/spool/internal/bytesize"
)

func TestIEC(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {18_937_856, "18.06 MiB"},
		{10_877_000_000, "10.13 GiB"}, {-3 << 29, "-1.50 GiB"}, {5 << 40, "5.00 TiB"},
		{3 << 50, "3.00 PiB"}, {math.MaxInt64, "8.00 EiB"},
	} {
		if got := bytesize.IEC(tc.n); got != tc.want {
			t.Errorf("IEC(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestSI(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {999, "999 B"}, {1000, "1.0 kB"}, {999_999, "1000.0 kB"},
		{383_800_000_000, "383.8 GB"}, {2_500_000_000_000, "2.5 TB"}, {math.MaxInt64, "9.2 EB"},
	} {
		if got := bytesize.SI(tc.n); got != tc.want {
			t.Errorf("SI(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func Example() {
	fmt.Println(bytesize.IEC(11 << 30))
	fmt.Println(bytesize.SI(383_814_000_000))
	// Output:
	// 11.00 GiB
	// 383.8 GB
}
