//go:build tools

// Package tools pins the operator-sdk command built by the Makefile.
package tools

import _ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
