//go:build tools

package main

// etcdctl is built from this module too (see the Makefile), at the same
// version as the server.
import _ "go.etcd.io/etcd/etcdctl/v3"
