package backup

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Store is a destination of snapshots.
type Store interface {
	// Location names key for humans: s3://<bucket>/<key>, pvc://<claim>/<key>.
	Location(key string) string
	// Staging is the file a snapshot for key is written to before Put.
	Staging(key string) (string, error)
	// Find returns what is stored at key, or nil when nothing is.
	Find(ctx context.Context, key string) (*Stored, error)
	// Put stores the checked file at staging under key, with meta, and
	// removes staging.
	Put(ctx context.Context, key, staging string, facts Facts, meta map[string]string) error
	// ReadBack reads everything stored at key and hashes it.
	ReadBack(ctx context.Context, key string) (Stored, error)
	// Fetch streams what is stored at key into w.
	Fetch(ctx context.Context, key string, w io.Writer) error
	// Delete removes what is stored at key; nothing there is no error.
	Delete(ctx context.Context, key string) error
}

// Stored is a snapshot as a store holds it.
type Stored struct {
	Size   int64
	SHA256 string
	// Meta is the snapshot's metadata, keys in lower case.
	Meta map[string]string
}

// Metadata keys stored with every snapshot, so a snapshot found without
// its EtcdBackup still says what it is.
const (
	MetaSHA256    = "etcd-sha256"
	MetaSize      = "etcd-size"
	MetaRevision  = "etcd-revision"
	MetaNamespace = "etcd-namespace"
	MetaCluster   = "etcd-cluster"
	MetaClusterID = "etcd-cluster-id"
	MetaMember    = "etcd-member"
	MetaVersion   = "etcd-version"
	MetaStorage   = "etcd-storage-version"
	MetaBackupUID = "etcd-backup-uid"
)

// S3Config is how to reach a bucket.
type S3Config struct {
	Endpoint, Bucket, Region, Addressing string
	// AccessKey, SecretKey and SessionToken are the credentials.
	AccessKey, SecretKey, SessionToken string
	// CAFile holds PEM CAs trusted besides the system's; "" for none.
	CAFile string
	// ScratchDir holds the staging files.
	ScratchDir string
}

type s3Store struct {
	cfg S3Config
	cli *minio.Client
}

// NewS3Store connects to nothing yet: the first call does.
func NewS3Store(cfg S3Config) (Store, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" {
		return nil, failf(ReasonInvalidInput, "spec.destination.s3.endpoint: %q is not a URL with a host", cfg.Endpoint)
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, failf(ReasonInvalidInput, "spec.destination.s3.credentialsSecret: the Secret needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	transport, err := minio.DefaultTransport(u.Scheme == "https")
	if err != nil {
		return nil, err
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, failf(ReasonInvalidInput, "spec.destination.s3.caSecret: %v", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, failf(ReasonInvalidInput, "spec.destination.s3.caSecret: no PEM certificate in it")
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	lookup := map[string]minio.BucketLookupType{"Path": minio.BucketLookupPath, "VirtualHost": minio.BucketLookupDNS}[cfg.Addressing]
	cli, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:       u.Scheme == "https",
		Region:       region,
		BucketLookup: lookup,
		Transport:    transport,
	})
	if err != nil {
		return nil, failf(ReasonInvalidInput, "spec.destination.s3.endpoint: %v", err)
	}
	return &s3Store{cfg: cfg, cli: cli}, nil
}

func (s *s3Store) Location(key string) string { return "s3://" + s.cfg.Bucket + "/" + key }

func (s *s3Store) Staging(key string) (string, error) {
	return filepath.Join(s.cfg.ScratchDir, "snapshot.db"), nil
}

func (s *s3Store) Find(ctx context.Context, key string) (*Stored, error) {
	ok, err := s.cli.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return nil, s.classify(err)
	}
	if !ok {
		return nil, failf(ReasonBucketNotFound, "spec.destination.s3.bucket: bucket %s does not exist at %s: create it (the operator never creates buckets)", s.cfg.Bucket, s.cfg.Endpoint)
	}
	info, err := s.cli.StatObject(ctx, s.cfg.Bucket, key, minio.StatObjectOptions{})
	if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
		return nil, nil
	}
	if err != nil {
		return nil, s.classify(err)
	}
	return &Stored{Size: info.Size, Meta: lowerKeys(info.UserMetadata)}, nil
}

// Put uploads the file with its size known, in 16 MiB parts, two at a
// time: never more than two parts in memory.
func (s *s3Store) Put(ctx context.Context, key, staging string, facts Facts, meta map[string]string) error {
	f, err := os.Open(staging)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = s.cli.PutObject(ctx, s.cfg.Bucket, key, f, facts.Size, minio.PutObjectOptions{
		UserMetadata: meta,
		ContentType:  "application/octet-stream",
		PartSize:     16 << 20,
		NumThreads:   2,
	})
	if err != nil {
		return s.classify(err)
	}
	return os.Remove(staging)
}

func (s *s3Store) ReadBack(ctx context.Context, key string) (Stored, error) {
	info, err := s.cli.StatObject(ctx, s.cfg.Bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return Stored{}, s.classify(err)
	}
	obj, err := s.cli.GetObject(ctx, s.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return Stored{}, s.classify(err)
	}
	defer func() { _ = obj.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, obj)
	if err != nil {
		return Stored{}, s.classify(err)
	}
	if n != info.Size {
		return Stored{}, failf(ReasonVerificationFailed, "reading %s back gave %d bytes, the store says %d", s.Location(key), n, info.Size)
	}
	return Stored{Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), Meta: lowerKeys(info.UserMetadata)}, nil
}

func (s *s3Store) Fetch(ctx context.Context, key string, w io.Writer) error {
	obj, err := s.cli.GetObject(ctx, s.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return s.classify(err)
	}
	defer func() { _ = obj.Close() }()
	if _, err := io.Copy(w, obj); err != nil {
		return s.classify(err)
	}
	return nil
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	err := s.cli.RemoveObject(ctx, s.cfg.Bucket, key, minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != minio.NoSuchKey {
		return s.classify(err)
	}
	return nil
}

// classify turns a store error into a Failure naming the field to fix.
func (s *s3Store) classify(err error) error {
	var f *Failure
	if errors.As(err, &f) {
		return err
	}
	resp := minio.ToErrorResponse(err)
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case resp.Code == minio.NoSuchBucket:
		return failf(ReasonBucketNotFound, "spec.destination.s3.bucket: bucket %s does not exist at %s: create it (the operator never creates buckets)", s.cfg.Bucket, s.cfg.Endpoint)
	case resp.Code == "AccessDenied":
		return failf(ReasonAccessDenied, "spec.destination.s3.credentialsSecret: access to bucket %s denied: %s", s.cfg.Bucket, resp.Message)
	case resp.Code == "SignatureDoesNotMatch", resp.Code == "InvalidAccessKeyId":
		return failf(ReasonAccessDenied, "spec.destination.s3.credentialsSecret: the store refuses the credentials (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", resp.Code)
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname):
		return failf(ReasonEndpointFailed, "spec.destination.s3.caSecret: the certificate of %s is not trusted: %v", s.cfg.Endpoint, err)
	case resp.StatusCode == 0:
		return failf(ReasonEndpointFailed, "spec.destination.s3.endpoint: %v", err)
	}
	return failf(ReasonStoreFailed, "%s: %v", s.Location(""), err)
}

func lowerKeys(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}

// VolumeConfig is a directory on a mounted claim.
type VolumeConfig struct {
	// Claim names the claim, for Location.
	Claim string
	// Root is where the claim is mounted.
	Root string
}

type volumeStore struct{ cfg VolumeConfig }

// NewVolumeStore stores snapshots as files under cfg.Root.
func NewVolumeStore(cfg VolumeConfig) Store { return &volumeStore{cfg: cfg} }

func (v *volumeStore) Location(key string) string { return "pvc://" + v.cfg.Claim + "/" + key }

// Root is where the claim is mounted.
func (v *volumeStore) Root() string { return v.cfg.Root }

func (v *volumeStore) path(key string) string {
	return filepath.Join(v.cfg.Root, filepath.FromSlash(key))
}

func (v *volumeStore) metaPath(key string) string {
	return strings.TrimSuffix(v.path(key), ".db") + ".json"
}

// Staging is <key>.part beside the snapshot: the snapshot is written once,
// on the claim, and renamed into place.
func (v *volumeStore) Staging(key string) (string, error) {
	p := v.path(key) + ".part"
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", failf(ReasonStoreFailed, "spec.destination.volume: %v", err)
	}
	return p, nil
}

func (v *volumeStore) Find(_ context.Context, key string) (*Stored, error) {
	fi, err := os.Stat(v.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, failf(ReasonStoreFailed, "spec.destination.volume: %v", err)
	}
	meta, _ := v.readMeta(key)
	return &Stored{Size: fi.Size(), Meta: meta}, nil
}

func (v *volumeStore) readMeta(key string) (map[string]string, error) {
	data, err := os.ReadFile(v.metaPath(key))
	if err != nil {
		return nil, err
	}
	meta := map[string]string{}
	return meta, json.Unmarshal(data, &meta)
}

// Put writes the metadata file, then renames the staged snapshot into
// place and syncs the directory: a snapshot is under its name only whole.
func (v *volumeStore) Put(_ context.Context, key, staging string, _ Facts, meta map[string]string) error {
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileSync(v.metaPath(key), data); err != nil {
		return failf(ReasonStoreFailed, "spec.destination.volume: %v", err)
	}
	if err := os.Rename(staging, v.path(key)); err != nil {
		return failf(ReasonStoreFailed, "spec.destination.volume: %v", err)
	}
	return syncDir(filepath.Dir(v.path(key)))
}

func (v *volumeStore) ReadBack(_ context.Context, key string) (Stored, error) {
	f, err := os.Open(v.path(key))
	if err != nil {
		return Stored{}, failf(ReasonVerificationFailed, "reading %s back: %v", v.Location(key), err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Stored{}, failf(ReasonVerificationFailed, "reading %s back: %v", v.Location(key), err)
	}
	meta, err := v.readMeta(key)
	if err != nil {
		return Stored{}, failf(ReasonVerificationFailed, "reading the metadata of %s back: %v", v.Location(key), err)
	}
	return Stored{Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), Meta: meta}, nil
}

func (v *volumeStore) Fetch(_ context.Context, key string, w io.Writer) error {
	f, err := os.Open(v.path(key))
	if err != nil {
		return failf(ReasonStoreFailed, "reading %s: %v", v.Location(key), err)
	}
	defer func() { _ = f.Close() }()
	_, err = io.Copy(w, f)
	return err
}

func (v *volumeStore) Delete(_ context.Context, key string) error {
	for _, p := range []string{v.path(key), v.metaPath(key), v.path(key) + ".part"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return failf(ReasonStoreFailed, "spec.destination.volume: %v", err)
		}
	}
	return syncDir(filepath.Dir(v.path(key)))
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// metaOf is the metadata stored with a snapshot.
func metaOf(facts Facts, from source, namespace, cluster, backupUID string) map[string]string {
	return map[string]string{
		MetaSHA256:    facts.SHA256,
		MetaSize:      strconv.FormatInt(facts.Size, 10),
		MetaRevision:  strconv.FormatInt(facts.Revision, 10),
		MetaNamespace: namespace,
		MetaCluster:   cluster,
		MetaClusterID: from.clusterID,
		MetaMember:    from.name,
		MetaVersion:   from.version,
		MetaStorage:   from.storageVersion,
		MetaBackupUID: backupUID,
	}
}
