//go:build !embedui

package frontend

import "embed"

//go:embed placeholder
var files embed.FS

const (
	root  = "placeholder"
	built = false
)
