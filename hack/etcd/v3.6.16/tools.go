//go:build tools

package main

// etcdctl and etcdutl are built from this module too (see the Makefile), at the same
// version as the server.
import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
)
