//go:build tools

// Package tools pins the versitygw command built by the Makefile.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
