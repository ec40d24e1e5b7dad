// Command vllm-standin serves the standin package's vLLM stand-in on a
// loopback port, for test suites outside Go. It prints
// "vllm-standin listening on http://127.0.0.1:PORT" and serves until
// interrupted.
package main
