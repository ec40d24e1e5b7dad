// Package bench holds the measurement harnesses behind spool bench that are
// more than a command's flags and printing: the compute kernels measured
// against the machine's memory bandwidth in the same run (Kernels), the
// decode loops of packed experts against memcpy and the disk (Unpack),
// prefill on the CPU, with every key computed and on the GPU, with the
// expert bytes read and the peak footprint against the plan (Prefill),
// decode with streamed experts against the disk's bandwidth probed in the
// same run (Stream), and the prompt cache's memory and disk restores
// against a cold prefill (PromptCache), and the disk and kernel figures
// spool fit predicts speed from (SpeedProbe). The harnesses that load a model
// open it through engine/host, as the app does.
//
// It measures; it does not decide what a result means. Figures are ratios to
// a limit measured alongside them, never absolute speeds compared with a
// constant. app/cmd_bench*.go parse the flags and print.
package bench
