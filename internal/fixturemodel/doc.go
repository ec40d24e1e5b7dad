// Package fixturemodel is test support: Shared loads a fixture model
// (../shared/fixtures/<name>, through internal/fixtures), or the committed
// demo model (fixtures.DemoName), with
// engine/loader's default options once per test binary, for the tests of
// packages above the loader (generate, scheduler, promptcache, model, server).
//
// The models it hands out are shared by every test of the binary: callers
// must not close or change them. Tests that need other options, or a model
// of their own, call loader.Open themselves. Packages the loader imports
// (plan, experts' internal tests, ...) cannot use it; internal/testmodel
// opens a container for them.
package fixturemodel
