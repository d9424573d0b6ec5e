//go:build tools

// Package tools pins the opm command built by the Makefile.
package tools

import _ "github.com/operator-framework/operator-registry/cmd/opm"
