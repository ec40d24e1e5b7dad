//go:build embedui

package frontend

import "embed"

//go:embed all:dist
var files embed.FS

const (
	root  = "dist"
	built = true
)
