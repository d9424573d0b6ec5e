//go:build tools

// Package tools pins grpc_health_probe, which the opm image carries and
// catalog Pods' probes run. operator-registry v1.65.0 names v0.4.47, which
// the module proxy does not serve; v0.4.63 is the nearest it does.
package tools

import _ "github.com/grpc-ecosystem/grpc-health-probe"
