//go:build tools

// Package tools pins the commands built from this wrapper module.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
