package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/etcd-operator/etcd-operator/internal/backup"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// restoreMain runs `manager restore install|run`: the init containers of
// a new cluster's seed that restores a snapshot. install copies this
// binary to --to, so that run can execute in the member's own etcd image
// beside its etcdutl.
func restoreMain(args []string) int {
	if len(args) == 0 || (args[0] != "install" && args[0] != "run") {
		fmt.Fprintln(os.Stderr, "usage: manager restore install|run [flags]")
		return 2
	}
	flags := flag.NewFlagSet("restore "+args[0], flag.ContinueOnError)
	var (
		p                                backup.RestoreParams
		to, passwordFile, terminationLog string
		s3                               backup.S3Config
		volume                           backup.VolumeConfig
		survivor                         backup.Survivor
		survivorURL, memberID, clusterID string
		caFile, certFile, keyFile        string
	)
	flags.StringVar(&to, "to", "", "install: where to copy this binary.")
	flags.StringVar(&p.DataDir, "data-dir", "/var/lib/etcd", "The member's data directory.")
	flags.StringVar(&p.Name, "name", "", "The seed member's name.")
	flags.StringVar(&p.PeerURL, "peer-url", "", "The seed member's peer URL.")
	flags.StringVar(&p.Token, "token", "", "The new cluster's --initial-cluster-token.")
	flags.StringVar(&p.Key, "key", "", "Object key or path of the snapshot.")
	flags.Int64Var(&p.Size, "size", 0, "Size the snapshot must have.")
	flags.StringVar(&p.SHA256, "sha256", "", "SHA-256 the snapshot must have.")
	flags.Int64Var(&p.Revision, "revision", 0, "Revision the snapshot must hold.")
	flags.StringVar(&p.Etcdutl, "etcdutl", "etcdutl", "etcdutl of the member's image.")
	flags.BoolVar(&p.AuthEnabled, "auth-enabled", false, "Whether the new cluster has authentication on.")
	flags.StringVar(&passwordFile, "password-file", "", "File holding the new cluster's root password.")
	flags.StringVar(&survivorURL, "survivor", "", "Client URL of the survivor a recovery restores, instead of a store.")
	flags.StringVar(&memberID, "survivor-member-id", "", "The survivor's member ID (hex) in the recovery plan.")
	flags.StringVar(&clusterID, "survivor-cluster-id", "", "The survivor's cluster ID (hex) in the recovery plan.")
	flags.Uint64Var(&survivor.RaftIndex, "survivor-raft-index", 0, "The raft index the survivor must have applied.")
	flags.StringVar(&caFile, "ca-file", "", "CA that signs the survivor's serving certificate; empty for plain HTTP.")
	flags.StringVar(&certFile, "cert-file", "", "Client certificate for the survivor.")
	flags.StringVar(&keyFile, "key-file", "", "Client certificate's key.")
	storeFlags(flags, &s3, &volume, &terminationLog)
	if err := flags.Parse(args[1:]); err != nil {
		return 2
	}
	if args[0] == "install" {
		if err := installSelf(to); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	res := func() backup.Result {
		from, err := restoreSource(&p.Key, s3, volume, survivor, survivorURL, memberID, clusterID, caFile, certFile, keyFile)
		if err != nil {
			return backup.Failed(p.Key, err)
		}
		p.From = from
		if passwordFile != "" {
			password, err := os.ReadFile(passwordFile)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return backup.Failed(p.Key, err)
			}
			p.RootPassword = string(password)
		}
		return backup.Restore(ctx, p)
	}()
	return report(res, terminationLog)
}

// restoreSource is the survivor when --survivor names one (and the key
// the result names, when none is given, its URL), else the store the
// flags describe.
func restoreSource(key *string, s3 backup.S3Config, volume backup.VolumeConfig, survivor backup.Survivor, url, memberID, clusterID, caFile, certFile, keyFile string) (backup.Source, error) {
	if url == "" {
		return newStore(s3, volume)
	}
	if *key == "" {
		*key = url // what the result names: the survivor has no keys
	}
	var err error
	if survivor.MemberID, err = etcd.ParseID(memberID); err != nil {
		return nil, fmt.Errorf("--survivor-member-id: %w", err)
	}
	if survivor.ClusterID, err = etcd.ParseID(clusterID); err != nil {
		return nil, fmt.Errorf("--survivor-cluster-id: %w", err)
	}
	// No password: nothing authenticates one without a quorum.
	if survivor.Etcd, err = etcdConfig(url, caFile, certFile, keyFile, ""); err != nil {
		return nil, err
	}
	survivor.NewClient = etcd.New
	return survivor, nil
}

// installSelf copies the running binary to path, executable.
func installSelf(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
