// Package sealed keeps local mode's secrets encrypted at rest: each value is
// sealed with AES-256-GCM under a key kept in the data directory, with the
// secret's namespace, name and key as associated data, so a ciphertext
// copied to another secret or key does not open. Store wraps the local
// object store so the API and the function server see plain Secrets while
// the file holds only ciphertext.
package sealed

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KeySize is the key's length in bytes (AES-256).
const KeySize = 32

// version prefixes every sealed value, so a later format can tell its own.
const version = "sless-sealed-v1:"

// ErrOpen is the error of a value that does not open: tampered with, moved
// from another secret or key, or sealed under another key file.
var ErrOpen = errors.New("cannot be decrypted: tampered with, or sealed with another key file")

// Sealer seals and opens values under one key.
type Sealer struct {
	aead cipher.AEAD
	path string
}

// LoadKey reads the key file at path, making one (0600, random) when there is
// none. A key file others may read is refused: the key is what keeps the
// values secret.
func LoadKey(path string) (*Sealer, error) {
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = makeKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("secrets key %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secrets key %s: mode %04o lets others read it; chmod 600 it", path, st.Mode().Perm())
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("secrets key %s: %d bytes, want %d", path, len(key), KeySize)
	}
	return newSealer(key, path)
}

func makeKey(path string) ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	// O_EXCL: two processes starting at once must not each write a key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return key, f.Close()
}

func newSealer(key []byte, path string) (*Sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead, path: path}, nil
}

// associated binds a value to where it belongs.
func associated(namespace, name, key string) []byte {
	return []byte(version + namespace + "\x00" + name + "\x00" + key)
}

// Seal encrypts the value of key in secret namespace/name.
func (s *Sealer) Seal(namespace, name, key string, plain []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(fmt.Sprintf("sealed: no randomness for a nonce: %v", err))
	}
	out := append([]byte(version), nonce...)
	return s.aead.Seal(out, nonce, plain, associated(namespace, name, key))
}

// Open decrypts what Seal made for the same namespace, name and key.
func (s *Sealer) Open(namespace, name, key string, sealed []byte) ([]byte, error) {
	n := len(version) + s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() || string(sealed[:len(version)]) != version {
		return nil, fmt.Errorf("secret %s/%s key %q: not a sealed value: %w", namespace, name, key, ErrOpen)
	}
	plain, err := s.aead.Open(nil, sealed[len(version):n], sealed[n:], associated(namespace, name, key))
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s key %q with the key in %s: %w", namespace, name, key, s.path, ErrOpen)
	}
	return plain, nil
}

// SealFile encrypts a file's content; id names the file (its role and
// whose it is) and is bound to it as Seal binds a value to its key.
func (s *Sealer) SealFile(id string, plain []byte) []byte {
	return s.Seal("\x00file", id, "", plain)
}

// OpenFile decrypts what SealFile made for the same id.
func (s *Sealer) OpenFile(id string, sealed []byte) ([]byte, error) {
	return s.Open("\x00file", id, "", sealed)
}

// Objects is the part of the local object store Store needs.
type Objects interface {
	client.Reader
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
	Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error
	Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
}

// Store keeps Secrets in Objects with their values sealed: Create and Update
// seal data (and stringData, folded in) before it is written, Get and List
// open it. Any other kind passes through untouched.
type Store struct {
	Objects Objects
	Sealer  *Sealer
}

func (s *Store) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := s.Objects.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if sec, ok := obj.(*corev1.Secret); ok {
		return s.open(sec)
	}
	return nil
}

func (s *Store) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := s.Objects.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*corev1.SecretList); ok {
		for i := range l.Items {
			if err := s.open(&l.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return s.Objects.Create(ctx, obj, opts...)
	}
	sealed := s.seal(sec)
	if err := s.Objects.Create(ctx, sealed, opts...); err != nil {
		return err
	}
	return s.takeBack(sec, sealed)
}

func (s *Store) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return s.Objects.Update(ctx, obj, opts...)
	}
	sealed := s.seal(sec)
	if err := s.Objects.Update(ctx, sealed, opts...); err != nil {
		return err
	}
	return s.takeBack(sec, sealed)
}

func (s *Store) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return s.Objects.Delete(ctx, obj, opts...)
}

// seal is a copy of sec whose data is sealed.
func (s *Store) seal(sec *corev1.Secret) *corev1.Secret {
	out := sec.DeepCopy()
	data := map[string][]byte{}
	for k, v := range sec.Data {
		data[k] = v
	}
	for k, v := range sec.StringData {
		data[k] = []byte(v)
	}
	out.StringData = nil
	out.Data = make(map[string][]byte, len(data))
	for k, v := range data {
		out.Data[k] = s.Sealer.Seal(sec.Namespace, sec.Name, k, v)
	}
	return out
}

// takeBack gives sec what the store set (metadata), with its data opened.
func (s *Store) takeBack(sec, stored *corev1.Secret) error {
	*sec = *stored
	return s.open(sec)
}

func (s *Store) open(sec *corev1.Secret) error {
	for k, v := range sec.Data {
		plain, err := s.Sealer.Open(sec.Namespace, sec.Name, k, v)
		if err != nil {
			return err
		}
		sec.Data[k] = plain
	}
	return nil
}
