// Package jinja implements a Jinja template engine purpose-built for LLM
// chat templates.
//
// It is Spool's patched copy of github.com/ardanlabs/jinja v1.8.0
// (Apache-2.0, see LICENSE): the same engine with every render bounded in
// steps, output and string size, list size, call depth and time, and
// cancelled with a context (RenderContext, Limits, LimitError). Package
// chat is its only user; README.spool.md lists what changed and why a
// copy was needed.
package jinja
