// Package testmodel is test support for packages that read a model
// directory below the loader: it opens a directory's config and container
// for a test, failing the test on an error and closing the container when
// the test ends.
//
// It does not find fixtures (internal/fixtures does) or load weights
// (engine/loader does); engine/config and engine/container, which it
// imports, cannot use it in their own tests.
package testmodel
