// Package kernels owns the numeric kernels of the engine: quantized
// matrix-vector and small-batch matrix products over the container's weight
// formats, plus the few vector primitives the model needs.
//
// Every kernel has a plain-Go reference (the *Ref functions) that defines its
// result; fast paths (SIMD through cgo or assembly, multi-threaded) must agree
// with the reference and must be deterministic: MatMul's row r is
// bit-identical to MatVec on row r of the input, so batched and single-row
// paths of the model produce the same numbers.
//
// The package does no I/O and holds no global mutable state. Products run
// on several goroutines through Spread, which returns once all the work is
// done: a helper goroutine does no work after the call that started it
// returns, and one the scheduler starts late finds nothing left and ends
// at once (waiting for it cost a thread wake-up on every product).
package kernels
