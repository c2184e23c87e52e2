//go:build tools

// Package tools pins the commands built from this wrapper module.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
