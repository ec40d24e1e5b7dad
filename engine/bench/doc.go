// Package bench holds the measurement harnesses behind spool bench that are
// more than a command's flags and printing: the compute kernels measured
// against the machine's memory bandwidth in the same run (Kernels), and the
// decode loops of packed experts against memcpy and the disk (Unpack).
//
// It measures; it does not decide what a result means. Figures are ratios to
// a limit measured alongside them, never absolute speeds compared with a
// constant.
package bench
