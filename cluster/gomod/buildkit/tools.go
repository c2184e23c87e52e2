//go:build tools

// Package tools pins the commands built from this wrapper module.
package tools

import (
	_ "github.com/moby/buildkit/cmd/buildkitd"
	_ "github.com/moby/buildkit/cmd/buildctl"
)
