// Package power owns power assertions: PreventSleep keeps the machine awake
// while a long job (a model download) runs, until the caller releases it.
//
// On macOS it holds an IOKit assertion (cgo); elsewhere it is a documented
// no-op, since a Linux server does not sleep under a running job.
package power
