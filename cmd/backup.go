package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/etcd-operator/etcd-operator/internal/backup"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// backupMain runs `manager backup run|delete`: what an EtcdBackup's Pods
// execute. It writes one backup.Result as the container's termination
// message and exits 0 when the result is a success.
func backupMain(args []string) int {
	if len(args) == 0 || (args[0] != "run" && args[0] != "delete") {
		fmt.Fprintln(os.Stderr, "usage: manager backup run|delete [flags]")
		return 2
	}
	fs := flag.NewFlagSet("backup "+args[0], flag.ContinueOnError)
	var (
		p                                    backup.Params
		endpoints, caFile, certFile, keyFile string
		passwordFile, terminationLog         string
		s3                                   backup.S3Config
		volume                               backup.VolumeConfig
	)
	fs.StringVar(&p.Namespace, "namespace", "", "Namespace of the EtcdBackup.")
	fs.StringVar(&p.Cluster, "cluster", "", "Name of the EtcdCluster.")
	fs.StringVar(&p.BackupUID, "backup-uid", "", "UID of the EtcdBackup, stored with the snapshot.")
	fs.StringVar(&p.Key, "key", "", "Object key or path of the snapshot in the destination.")
	fs.StringVar(&endpoints, "endpoints", "", "Client URLs of the members, comma-separated.")
	fs.StringVar(&caFile, "ca-file", "", "CA that signs the members' serving certificates; empty for plain HTTP.")
	fs.StringVar(&certFile, "cert-file", "", "Client certificate.")
	fs.StringVar(&keyFile, "key-file", "", "Client certificate's key.")
	fs.StringVar(&passwordFile, "password-file", "", "File holding root's password, when the cluster has one.")
	fs.StringVar(&s3.ScratchDir, "scratch-dir", os.TempDir(), "Directory for the snapshot before upload.")
	storeFlags(fs, &s3, &volume, &terminationLog)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	res := func() backup.Result {
		store, err := newStore(s3, volume)
		if err != nil {
			return backup.Failed(p.Key, err)
		}
		p.Store = store
		if args[0] == "delete" {
			return backup.Delete(ctx, store, p.Key, p.BackupUID)
		}
		p.Etcd, err = etcdConfig(endpoints, caFile, certFile, keyFile, passwordFile)
		if err != nil {
			return backup.Failed(p.Key, err)
		}
		p.NewClient = etcd.New
		return backup.Run(ctx, p)
	}()
	return report(res, terminationLog)
}

// storeFlags binds the flags that name where snapshots are, and where the
// result goes: the same for every Pod of backups and restores.
func storeFlags(fs *flag.FlagSet, s3 *backup.S3Config, volume *backup.VolumeConfig, terminationLog *string) {
	fs.StringVar(&s3.Endpoint, "s3-endpoint", "", "S3 endpoint URL.")
	fs.StringVar(&s3.Bucket, "s3-bucket", "", "S3 bucket.")
	fs.StringVar(&s3.Region, "s3-region", "", "S3 region.")
	fs.StringVar(&s3.Addressing, "s3-addressing", "Auto", "Auto, Path or VirtualHost.")
	fs.StringVar(&s3.CAFile, "s3-ca-file", "", "PEM CAs trusted for the S3 endpoint besides the system's.")
	fs.StringVar(&volume.Root, "volume-root", "", "Where the claim holding the snapshots is mounted.")
	fs.StringVar(&volume.Claim, "volume-claim", "", "Name of the claim holding the snapshots.")
	fs.StringVar(terminationLog, "termination-log", "/dev/termination-log", "Where the result is written.")
}

// report prints res and writes it as the container's termination
// message; the exit code is 0 for a success.
func report(res backup.Result, terminationLog string) int {
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if err := os.WriteFile(terminationLog, out, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "writing the result to %s: %v\n", terminationLog, err)
	}
	if !res.Succeeded() {
		return 1
	}
	return 0
}

func newStore(s3 backup.S3Config, volume backup.VolumeConfig) (backup.Store, error) {
	if volume.Root != "" {
		return backup.NewVolumeStore(volume), nil
	}
	s3.AccessKey = os.Getenv("AWS_ACCESS_KEY_ID")
	s3.SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
	s3.SessionToken = os.Getenv("AWS_SESSION_TOKEN")
	return backup.NewS3Store(s3)
}

// etcdConfig is how the runner reaches the members: the files the Pod
// mounts from the cluster's Secrets.
func etcdConfig(endpoints, caFile, certFile, keyFile, passwordFile string) (etcd.Config, error) {
	cfg := etcd.Config{Endpoints: strings.Split(endpoints, ",")}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return cfg, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return cfg, fmt.Errorf("%s holds no PEM certificate", caFile)
		}
		cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if certFile != "" {
			pair, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return cfg, err
			}
			cfg.TLS.Certificates = []tls.Certificate{pair}
		}
	}
	if passwordFile != "" {
		// The Secret is mounted optional: absent until auth was turned on.
		password, err := os.ReadFile(passwordFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return cfg, err
		}
		if len(password) > 0 {
			cfg.Username, cfg.Password = etcd.RootUser, string(password)
		}
	}
	return cfg, nil
}
