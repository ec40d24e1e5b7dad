package speed

import (
	"fmt"
	"strings"
)

// Chip is an Apple silicon chip's published figures.
type Chip struct {
	Name string `json:"name"`
	// SSDReadBytesPerSecond is the internal SSD's reported sequential read
	// rate for the 1 TB and larger configurations a 357 GiB artifact needs.
	SSDReadBytesPerSecond float64 `json:"ssd_read_bytes_per_second"`
	// MemoryBytesPerSecond is Apple's unified memory bandwidth.
	MemoryBytesPerSecond float64 `json:"memory_bytes_per_second"`
	// GPUFlops is the GPU's FP32 throughput (the largest GPU of the chip).
	GPUFlops float64 `json:"gpu_flops"`
	// PerformanceCores is the chip's performance cores in its smallest
	// configuration, which decoding packed experts spreads over.
	PerformanceCores int `json:"performance_cores"`
}

// Chips are the Apple chips a Mac that can hold GLM-5.2's dense part (32 GB
// and up) ships with. Sources:
//   - Memory bandwidth: Apple's newsroom announcements and Mac tech specs
//     pages (apple.com/newsroom, support.apple.com/specs): M1 68.25 GB/s,
//     M1 Pro 200, M1 Max 400 (2021-10-18), M2 100 (2022-06-06), M2 Pro 200,
//     M2 Max 400 (2023-01-17), M3 100, M3 Pro 150, M3 Max 400 (2023-10-30),
//     M4 120, M4 Pro 273, M4 Max 546 (2024-10-30).
//   - GPU FP32 TFLOP/s: Apple's announcements for M1 (2.6), M1 Pro (5.2),
//     M1 Max (10.4), M2 (3.6), M2 Pro (6.8), M2 Max (13.6); Apple stopped
//     quoting TFLOP/s with M3, so M3 (4.1), M3 Pro (7.4), M3 Max (16.4), M4
//     (4.3), M4 Pro (9.2) and M4 Max (18.4) are cores x 128 ALUs x 2 x the
//     reported clock, as compiled by Wikipedia's "Apple M3"/"Apple M4"
//     articles.
//   - SSD read: Apple publishes none; these are reviewers' Blackmagic Disk
//     Speed Test and AmorphousDiskMark sequential reads of 1 TB+ models
//     (MacBook Air/Mac mini M1-M4 about 2.9-3.3 GB/s; M1-M3 Pro/Max
//     MacBook Pro about 5.3-6 GB/s; M4 Pro/Max about 6.5 GB/s), taken at
//     the low end. docs/speed.md says how to replace them with a probe.
//   - Performance cores: Apple's tech specs of the smallest configuration
//     (M1 Pro 8-core: 6; M2 Pro 10-core: 6; M3 Pro 11-core: 5; M3 Max
//     14-core: 10; M4 Pro 12-core: 8; M4 Max 14-core: 10; M1/M2/M3/M4: 4;
//     M1 Max, M2 Max: 8).
var chips = []Chip{
	{"M1", 2.9e9, 68.25e9, 2.6e12, 4},
	{"M1 Pro", 5.3e9, 200e9, 5.2e12, 6},
	{"M1 Max", 5.3e9, 400e9, 10.4e12, 8},
	{"M2", 2.9e9, 100e9, 3.6e12, 4},
	{"M2 Pro", 5.3e9, 200e9, 6.8e12, 6},
	{"M2 Max", 5.3e9, 400e9, 13.6e12, 8},
	{"M3", 2.9e9, 100e9, 4.1e12, 4},
	{"M3 Pro", 5.3e9, 150e9, 7.4e12, 5},
	{"M3 Max", 5.5e9, 400e9, 16.4e12, 10},
	{"M4", 2.9e9, 120e9, 4.3e12, 4},
	{"M4 Pro", 6.5e9, 273e9, 9.2e12, 8},
	{"M4 Max", 6.5e9, 546e9, 18.4e12, 10},
}

// NEONDecodeBytesPerSecond is the stated rate one Apple performance core
// rebuilds packed experts at with the NEON loop, until it is measured on
// Apple hardware: the AVX-512 loop's on a 2-core x86 VM (2.2-3.4 GB/s a
// core, kernels.RANSLoop.Fast), taken at its low end, since the NEON loop
// does the same in-register table lookups 8 lanes at a time on cores with
// four vector pipes. `spool bench probe` on a Mac measures it.
const NEONDecodeBytesPerSecond = 2.2e9

// Chips lists the chips with published figures, oldest first.
func Chips() []Chip { return append([]Chip(nil), chips...) }

// LookupChip finds a chip by name ("M4 Pro", "m4-pro", "M4Pro").
func LookupChip(name string) (Chip, error) {
	key := func(s string) string {
		return strings.NewReplacer(" ", "", "-", "", "_", "", "apple", "").Replace(strings.ToLower(s))
	}
	for _, c := range chips {
		if key(c.Name) == key(name) {
			return c, nil
		}
	}
	names := make([]string, len(chips))
	for i, c := range chips {
		names[i] = c.Name
	}
	return Chip{}, fmt.Errorf("speed: no published figures for chip %q (known: %s)", name, strings.Join(names, ", "))
}

// Assumed fractions of a chip's published figures that Spool reaches.
const (
	// chipDiskShare: whole-expert reads (about 19 MB each, several in
	// flight) are long enough to run near the sequential rate; 0.9 of it.
	chipDiskShare = 0.9
	// chipKernelShare: Apple's CPU clusters read about half of the unified
	// memory bandwidth (AnandTech measured about 200-240 GB/s of the M1
	// Max's 400 from the CPU cores); decode's products run there.
	chipKernelShare = 0.5
)

// Machine is the figures a prediction for the chip runs on: decode on the
// CPU, prefill on the GPU.
func (c Chip) Machine() Machine {
	return Machine{
		Name: fmt.Sprintf("Apple %s (published figures: SSD %.1f GB/s, memory %.0f GB/s, GPU %.1f TFLOP/s)",
			c.Name, c.SSDReadBytesPerSecond/1e9, c.MemoryBytesPerSecond/1e9, c.GPUFlops/1e12),
		DiskBytesPerSecond:      chipDiskShare * c.SSDReadBytesPerSecond,
		DiskBurstBytesPerSecond: chipDiskShare * c.SSDReadBytesPerSecond,
		KernelBytesPerSecond:    chipKernelShare * c.MemoryBytesPerSecond,
		MatMul8BytesPerSecond:   chipKernelShare * c.MemoryBytesPerSecond,
		GPUFlops:                c.GPUFlops,
		DecodeBytesPerSecond:    NEONDecodeBytesPerSecond,
		DecodeCores:             float64(c.PerformanceCores),
		DecodeNote:              "the NEON loop's stated rate on an Apple core, not measured on one yet",
		Notes: []string{
			fmt.Sprintf("The %s's figures are published ones, not probed: reads are taken at %.0f%% of the SSD's reported sequential rate, in a token's bursts as with the queue kept full (a burst of 8 experts is about 150 MB; an NVMe read starts in about 0.1 ms), with no CPU time (the SSD's DMA moves the bytes), and decode's products at %.0f%% of the memory bandwidth (what Apple's CPU cores reach); prefill runs on the GPU. `spool bench probe` on the Mac replaces them with measurements.",
				c.Name, 100*chipDiskShare, 100*chipKernelShare),
		},
	}
}
