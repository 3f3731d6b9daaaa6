package testbed

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushImage pushes img to repo:tag on the plain-HTTP registry at host
// (host:port) and returns its digest-pinned reference, host/repo@sha256:….
func PushImage(ctx context.Context, host, repo, tag string, img v1.Image, auth authn.Authenticator) (string, error) {
	ref, err := name.NewTag(host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("image reference for %s: %w", repo, err)
	}
	if auth == nil {
		auth = authn.Anonymous
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuth(auth)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return ref.Context().Digest(digest.String()).String(), nil
}
